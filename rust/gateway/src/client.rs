//! A minimal blocking HTTP/1.1 client over one keep-alive connection, for
//! `agenra bench serve` and the tests (no client library needed for JSON
//! requests to a known server).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One connection to the server.
pub struct Client {
    addr: SocketAddr,
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    /// Sent as `Authorization: Bearer …` with every request.
    token: Option<String>,
}

impl Client {
    /// Connects to `addr` (with `TCP_NODELAY`, and a read timeout).
    pub fn connect(addr: SocketAddr) -> io::Result<Client> {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let writer = stream.try_clone()?;
        Ok(Client {
            addr,
            reader: BufReader::new(stream),
            writer,
            token: None,
        })
    }

    /// Sends `token` as the bearer credential from now on.
    pub fn with_token(mut self, token: &str) -> Client {
        self.token = Some(token.to_string());
        self
    }

    /// Changes the bearer credential (`None`: none).
    pub fn set_token(&mut self, token: Option<&str>) {
        self.token = token.map(str::to_string);
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sends a request and reads the answer: its status and body.
    pub fn request(&mut self, method: &str, path: &str, body: &[u8]) -> io::Result<(u16, Vec<u8>)> {
        let auth = self
            .token
            .as_ref()
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        let mut buf = Vec::with_capacity(head.len() + body.len());
        buf.extend_from_slice(head.as_bytes());
        buf.extend_from_slice(body);
        self.writer.write_all(&buf)?;
        self.read_response()
    }

    /// Sends `POST path` with a JSON body.
    pub fn post(
        &mut self,
        path: &str,
        body: &serde_json::Value,
    ) -> io::Result<(u16, serde_json::Value)> {
        let (status, bytes) = self.request("POST", path, body.to_string().as_bytes())?;
        Ok((status, parse_json(&bytes)))
    }

    /// Sends `GET path`.
    pub fn get(&mut self, path: &str) -> io::Result<(u16, serde_json::Value)> {
        let (status, bytes) = self.request("GET", path, b"")?;
        Ok((status, parse_json(&bytes)))
    }

    /// Reads one response (status line, headers, a `Content-Length` body).
    pub fn read_response(&mut self) -> io::Result<(u16, Vec<u8>)> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection",
            ));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad status line {line:?}"),
                )
            })?;
        let mut length = 0usize;
        loop {
            line.clear();
            if self.reader.read_line(&mut line)? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "truncated headers",
                ));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().map_err(|_| {
                        io::Error::new(io::ErrorKind::InvalidData, "bad content-length")
                    })?;
                }
            }
        }
        let mut body = vec![0; length];
        self.reader.read_exact(&mut body)?;
        Ok((status, body))
    }
}

fn parse_json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(bytes).into_owned()))
}
