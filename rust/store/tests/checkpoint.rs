//! Signed checkpoints: what `agenra audit verify --public-key` rejects.

use agenra_store::{
    chain_line, generate_key_file, verify_lines, CheckpointSigner, CheckpointVerifier, Checkpoints,
    Committer, Every, Head, Kind, Log, MemoryBackend, PublicKey, Record, VerifyError,
};
use std::path::PathBuf;

fn signer(n: u8) -> CheckpointSigner {
    CheckpointSigner::from_seed([n; 32])
}

fn event(i: u64) -> Record {
    Record {
        kind: Kind::Event,
        verdict: Some("ALLOW".into()),
        reason: Some(format!("call {i}")),
        ..Record::default()
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agenra-cp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A log of 8 events appended one at a time, a checkpoint after every 3:
/// records 1-3, cp 4, 5-7, cp 8, 9-10. Returns its lines and the kept
/// (last written out) checkpoint line.
fn signed_log(out: &std::path::Path) -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut log = Log::open(Box::new(MemoryBackend::default()))
        .unwrap()
        .with_checkpoints(Checkpoints {
            signer: signer(7),
            every: Every::Records(3),
            out: Some(out.to_path_buf()),
        });
    for i in 0..8 {
        log.append(&mut [event(i)]).unwrap();
    }
    let mut lines = Vec::new();
    log.scan(1, &mut |_, l| {
        lines.push(l.to_vec());
        Ok(())
    })
    .unwrap();
    let kept = std::fs::read(out).unwrap();
    (lines, kept)
}

fn check(
    lines: &[Vec<u8>],
    key: Option<&CheckpointSigner>,
    kept: Option<&[u8]>,
) -> Result<agenra_store::CheckpointSummary, VerifyError> {
    verify_lines(lines.iter().map(Vec::as_slice))?;
    let key = key.map(|k| PublicKey::parse(&k.public_key()).unwrap());
    let mut v = CheckpointVerifier::new(key);
    if let Some(kept) = kept {
        v.keep(kept.strip_suffix(b"\n").unwrap_or(kept))?;
    }
    for (i, l) in lines.iter().enumerate() {
        v.push(i as u64 + 1, l)?;
    }
    v.finish()
}

/// Re-chains parsed records (what a forger without the key can do: every
/// hash and link recomputed).
fn rechain(records: Vec<Record>) -> Vec<Vec<u8>> {
    let mut head = Head::default();
    records
        .into_iter()
        .enumerate()
        .map(|(i, mut r)| {
            r.seq = i as u64 + 1;
            r.prev = head.hash.clone();
            let (line, hash) = chain_line(&r).unwrap();
            head = Head { seq: r.seq, hash };
            line
        })
        .collect()
}

fn parse(lines: &[Vec<u8>]) -> Vec<Record> {
    lines
        .iter()
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

#[test]
fn checkpoints_are_appended_signed_and_written_out() {
    let dir = scratch("ok");
    let out = dir.join("last.checkpoint");
    let (lines, kept) = signed_log(&out);
    assert_eq!(lines.len(), 10);
    let kinds: Vec<Kind> = parse(&lines).iter().map(|r| r.kind).collect();
    assert_eq!(kinds[3], Kind::Checkpoint);
    assert_eq!(kinds[7], Kind::Checkpoint);
    // The kept file is the last checkpoint's stored line.
    assert_eq!(kept.strip_suffix(b"\n").unwrap(), &lines[7][..]);
    let s = check(&lines, Some(&signer(7)), Some(&kept)).unwrap();
    assert_eq!(
        (s.count, s.signed, s.last, s.kept),
        (2, 2, Some(8), Some(8))
    );
    // Without a key they are counted, not checked.
    let s = check(&lines, None, None).unwrap();
    assert_eq!((s.count, s.signed), (2, 0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_changed_record_is_rejected_even_when_rechained() {
    let dir = scratch("changed");
    let (lines, _) = signed_log(&dir.join("cp"));
    let mut records = parse(&lines);
    records[1].verdict = Some("DENY".into());
    let forged = rechain(records);
    let e = check(&forged, Some(&signer(7)), None).unwrap_err();
    assert_eq!(e.seq, 4, "{e}");
    assert!(e.reason.contains("commits to"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dropped_record_is_rejected_even_when_rechained() {
    let dir = scratch("dropped");
    let (lines, _) = signed_log(&dir.join("cp"));
    let mut dropped = lines.clone();
    dropped.remove(4);
    assert!(check(&dropped, Some(&signer(7)), None).is_err());
    let mut records = parse(&lines);
    records.remove(4);
    let e = check(&rechain(records), Some(&signer(7)), None).unwrap_err();
    assert_eq!(e.seq, 7, "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_forged_checkpoint_is_rejected() {
    let dir = scratch("forged");
    let (lines, _) = signed_log(&dir.join("cp"));
    let mut records = parse(&lines);
    records[1].verdict = Some("DENY".into());
    let mut forged = rechain(records);
    // The forger fixes the checkpoint's heads to the new chain, but cannot
    // sign them.
    let mut records = parse(&forged);
    let prev = records[3].prev.clone();
    records[3].checkpoint.as_mut().unwrap().heads[0].hash = prev;
    forged = rechain(records);
    let e = check(&forged, Some(&signer(7)), None).unwrap_err();
    assert_eq!(e.seq, 4);
    assert!(e.reason.contains("does not check"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_checkpoint_signed_with_another_key_is_rejected() {
    let dir = scratch("otherkey");
    let (lines, _) = signed_log(&dir.join("cp"));
    let e = check(&lines, Some(&signer(8)), None).unwrap_err();
    assert_eq!(e.seq, 4);
    assert!(e.reason.contains("another key"), "{e}");
    // Re-signed by the forger's own key: still another key.
    let mut records = parse(&lines);
    records[1].verdict = Some("DENY".into());
    let mut records = parse(&rechain(records));
    for i in [3, 7] {
        let cp = records[i].checkpoint.as_ref().unwrap();
        let mut heads = cp.heads.clone();
        heads[0].hash = records[i].prev.clone();
        records[i].checkpoint = Some(signer(9).sign(cp.time_ms, heads).unwrap());
        records = parse(&rechain(records));
    }
    let forged = rechain(records);
    assert!(check(&forged, Some(&signer(9)), None).is_ok());
    let e = check(&forged, Some(&signer(7)), None).unwrap_err();
    assert!(e.reason.contains("another key"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_log_truncated_with_its_head_is_caught_by_the_kept_checkpoint() {
    let dir = scratch("truncated");
    let (lines, kept) = signed_log(&dir.join("cp"));
    // Cut after the first checkpoint: the chain and the checkpoints left
    // all check...
    let cut = &lines[..5];
    assert!(check(cut, Some(&signer(7)), None).is_ok());
    // ...but not against the checkpoint the operator kept.
    let e = check(cut, Some(&signer(7)), Some(&kept)).unwrap_err();
    assert!(e.reason.contains("truncated"), "{e}");
    // A log rewritten from the kept checkpoint's place on.
    let mut records = parse(&lines);
    records.truncate(7);
    records.push(event(99));
    let e = check(&rechain(records), Some(&signer(7)), Some(&kept)).unwrap_err();
    assert!(e.reason.contains("rewritten"), "{e}");
    // A changed kept checkpoint is refused.
    let text = String::from_utf8(kept.clone())
        .unwrap()
        .replace("\"seq\":7", "\"seq\":9");
    assert!(check(&lines, Some(&signer(7)), Some(text.as_bytes())).is_err());
    // A key is needed to trust it.
    let mut v = CheckpointVerifier::new(None);
    assert!(v.keep(&kept).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_key_without_any_checkpoint_in_the_log_is_an_error() {
    let mut log = Log::open(Box::new(MemoryBackend::default())).unwrap();
    log.append(&mut [event(1), event(2)]).unwrap();
    let mut lines = Vec::new();
    log.scan(1, &mut |_, l| {
        lines.push(l.to_vec());
        Ok(())
    })
    .unwrap();
    let e = check(&lines, Some(&signer(7)), None).unwrap_err();
    assert!(e.reason.contains("no signed checkpoint"), "{e}");
    assert!(check(&lines, None, None).is_ok());
}

#[test]
fn the_committer_signs_the_tail_when_it_stops() {
    let dir = scratch("stop");
    let path = dir.join("store.redb");
    let log = Log::open_redb(&path)
        .unwrap()
        .with_checkpoints(Checkpoints {
            signer: signer(7),
            every: Every::Records(1000),
            out: Some(dir.join("cp")),
        });
    let c = Committer::start(log, 64);
    for i in 0..3 {
        c.submit_wait(event(i)).unwrap();
    }
    c.shutdown();
    let log = Log::open_redb(&path).unwrap();
    assert_eq!(log.head().seq, 4);
    let mut lines = Vec::new();
    log.scan(1, &mut |_, l| {
        lines.push(l.to_vec());
        Ok(())
    })
    .unwrap();
    let kept = std::fs::read(dir.join("cp")).unwrap();
    let s = check(&lines, Some(&signer(7)), Some(&kept)).unwrap();
    assert_eq!(s.kept, Some(4));
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn key_files_are_private_and_every_parses() {
    let dir = scratch("keys");
    let path = dir.join("key");
    let public = generate_key_file(&path).unwrap();
    assert_eq!(public.len(), 64);
    assert!(generate_key_file(&path).is_err(), "never overwrites a key");
    let s = CheckpointSigner::from_file(&path).unwrap();
    assert_eq!(s.public_key(), public);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = CheckpointSigner::from_file(&path).unwrap_err();
        assert!(e.to_string().contains("chmod 600"), "{e}");
    }
    let bad = dir.join("bad");
    std::fs::write(&bad, "zz").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    assert!(CheckpointSigner::from_file(&bad).is_err());
    assert!(PublicKey::parse("abc").is_err());
    assert!(PublicKey::parse(&public).is_ok());
    assert_eq!("1000".parse::<Every>(), Ok(Every::Records(1000)));
    assert_eq!(
        "60s".parse::<Every>(),
        Ok(Every::Time(std::time::Duration::from_secs(60)))
    );
    assert!("0".parse::<Every>().is_err());
    assert!("x".parse::<Every>().is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_log_that_does_not_reach_the_kept_checkpoint_is_refused_at_start() {
    let dir = scratch("start");
    let out = dir.join("cp");
    let (lines, _) = signed_log(&out);
    let config = || Checkpoints {
        signer: signer(7),
        every: Every::Records(3),
        out: Some(out.clone()),
    };
    let copy = |n: usize| {
        let mut b = MemoryBackend::default();
        let head = verify_lines(lines[..n].iter().map(Vec::as_slice)).unwrap();
        use agenra_store::Backend;
        b.append(1, &lines[..n], &head).unwrap();
        Log::open(Box::new(b)).unwrap().with_checkpoints(config())
    };
    // The whole log, and a log that went on after it: fine.
    copy(10).check_kept_checkpoint().unwrap();
    copy(8).check_kept_checkpoint().unwrap();
    // Cut before the kept checkpoint (record 8), head and all: refused.
    let e = copy(5).check_kept_checkpoint().unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    // Rewritten from before it: refused.
    let mut records = parse(&lines);
    records[6].reason = Some("changed".into());
    let forged = rechain(records);
    let mut b = MemoryBackend::default();
    let head = verify_lines(forged.iter().map(Vec::as_slice)).unwrap();
    use agenra_store::Backend;
    b.append(1, &forged, &head).unwrap();
    let log = Log::open(Box::new(b)).unwrap().with_checkpoints(config());
    let e = log.check_kept_checkpoint().unwrap_err();
    assert!(e.to_string().contains("rewritten"), "{e}");
    // Another key: refused (the kept checkpoint is not this server's).
    let log = Log::open(Box::new(MemoryBackend::default()))
        .unwrap()
        .with_checkpoints(Checkpoints {
            signer: signer(8),
            every: Every::Records(3),
            out: Some(out.clone()),
        });
    assert!(log.check_kept_checkpoint().is_err());
    // No kept file yet: fine.
    std::fs::remove_file(&out).unwrap();
    copy(5).check_kept_checkpoint().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
