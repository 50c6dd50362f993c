// The approvals page (served as a file: the Content-Security-Policy allows
// no inline script). It signs in, polls the paused calls every second,
// and submits decisions bound to the digest of the card shown.
'use strict';
(function () {
  const POLL_MS = 1000;

  function post(url, body) {
    return fetch(url, {
      method: 'POST',
      credentials: 'same-origin',
      cache: 'no-store',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    }).then(function (r) {
      return r.text().then(function (t) {
        let j = null;
        try { j = JSON.parse(t); } catch (e) { j = { error: t }; }
        return { status: r.status, body: j };
      });
    });
  }

  function signIn() {
    const form = document.getElementById('login');
    const out = document.getElementById('login-error');
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      const token = document.getElementById('token').value;
      out.textContent = '';
      post('/desk/login', { token: token }).then(function (r) {
        if (r.status === 200) {
          window.location.reload();
        } else {
          out.textContent = 'Refused (' + r.status + '): ' + (r.body && r.body.error || '');
        }
      }, function (e) { out.textContent = 'Cannot reach the server: ' + e; });
    });
  }

  function minutes(s) {
    s = Math.max(0, Math.floor(s));
    const m = Math.floor(s / 60);
    const r = s % 60;
    return m + ':' + (r < 10 ? '0' : '') + r;
  }

  // The server's clock at the last poll, and when it was read locally.
  let serverNow = 0;
  let readAt = Date.now();

  function tick() {
    const now = serverNow + (Date.now() - readAt) / 1000;
    document.querySelectorAll('article.call:not(.settled) .count').forEach(function (el) {
      const left = Number(el.dataset.expires) - now;
      el.textContent = left > 0 ? minutes(left) : 'expired';
    });
  }

  function answerText(act, r) {
    const b = r.body || {};
    if (r.status !== 200) {
      return { cls: 'deny', text: 'Refused (' + r.status + '): ' + (b.error || '') };
    }
    if (act === 'reject') {
      const back = (b.refunded || []).join(', ');
      return { cls: 'reject', text: 'REJECTED: the call will not run' + (back ? '; units returned to ' + back : '') + '.' };
    }
    if (b.decision === 'ALLOW') {
      return { cls: 'allow', text: 'ALLOW: the call runs. ' + (b.reason || '') };
    }
    return {
      cls: 'deny',
      text: (b.decision || 'DENY') + ': the re-check at approval time failed (' + (b.rule || '') + '): ' + (b.reason || ''),
    };
  }

  function wire(card) {
    const form = card.querySelector('form.decide');
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      const act = ev.submitter && ev.submitter.value === 'reject' ? 'reject' : 'approve';
      const reason = form.querySelector('textarea').value;
      const buttons = form.querySelectorAll('button');
      buttons.forEach(function (b) { b.disabled = true; });
      const answer = card.querySelector('.answer');
      answer.textContent = (act === 'approve' ? 'Approving' : 'Rejecting') + '…';
      const body = {
        tenant: card.dataset.tenant,
        session: card.dataset.session,
        digest: card.dataset.digest,
      };
      if (reason.trim() !== '') { body.reason = reason; }
      const url = '/desk/api/approvals/' + encodeURIComponent(card.dataset.call) + '/' + act;
      post(url, body).then(function (r) {
        const a = answerText(act, r);
        answer.textContent = a.text;
        answer.className = 'answer ' + a.cls;
        if (r.status === 200 || r.status === 409 || r.status === 410 || r.status === 404) {
          card.classList.add('settled');
          card.dataset.settled = a.cls;
        } else {
          buttons.forEach(function (b) { b.disabled = false; });
        }
        answer.focus();
      }, function (e) {
        answer.textContent = 'Cannot reach the server: ' + e;
        buttons.forEach(function (b) { b.disabled = false; });
      });
    });
  }

  function render(data) {
    const list = document.getElementById('list');
    const status = document.getElementById('status');
    serverNow = data.now;
    readAt = Date.now();
    const live = new Set();
    // Newest first: insert the new ones in order before the first card.
    let before = list.firstElementChild;
    data.approvals.forEach(function (c) {
      live.add(c.digest);
      const have = Array.prototype.find.call(list.children, function (el) {
        return el.dataset.digest === c.digest;
      });
      if (have) { before = have.nextElementSibling; return; }
      const t = document.createElement('template');
      t.innerHTML = c.html;
      const card = t.content.firstElementChild;
      if (!card) { return; }
      list.insertBefore(card, before);
      wire(card);
    });
    // A card whose call no longer waits: settled elsewhere or expired.
    Array.prototype.slice.call(list.children).forEach(function (el) {
      if (!live.has(el.dataset.digest) && !el.classList.contains('settled')) {
        el.classList.add('settled');
        el.querySelectorAll('button, textarea').forEach(function (b) { b.disabled = true; });
        const a = el.querySelector('.answer');
        if (a.textContent === '') { a.textContent = 'No longer waiting (settled elsewhere or expired).'; }
      }
    });
    const n = data.approvals.length;
    status.textContent = n === 0 ? 'No call waits for approval.' : n + ' call(s) wait for approval.';
    tick();
  }

  function poll() {
    fetch('/desk/api/approvals', { credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) {
        if (r.status === 401) { window.location.reload(); return null; }
        return r.json().then(function (j) { return { status: r.status, body: j }; });
      })
      .then(function (r) {
        if (!r) { return; }
        if (r.status === 200) { render(r.body); } else {
          document.getElementById('status').textContent = 'Refused (' + r.status + '): ' + (r.body.error || '');
        }
      }, function (e) {
        document.getElementById('status').textContent = 'Cannot reach the server: ' + e;
      })
      .finally(function () { window.setTimeout(poll, POLL_MS); });
  }

  function desk() {
    document.getElementById('logout').addEventListener('submit', function (ev) {
      ev.preventDefault();
      post('/desk/logout', {}).then(function () { window.location.reload(); });
    });
    window.setInterval(tick, 1000);
    poll();
  }

  document.addEventListener('DOMContentLoaded', function () {
    if (document.getElementById('login')) { signIn(); }
    if (document.getElementById('list')) { desk(); }
  });
})();
