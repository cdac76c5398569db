// authd's passkey script: sign in with a passkey on the login page
// ([data-passkey-signin]), add one on the account page or with an
// enrolment link ([data-passkey-enrol]). Served from /static/passkey.js
// (the pages' CSP allows scripts from 'self' only, none inline).
(function () {
  'use strict';

  function dec(s) {
    s = s.replace(/-/g, '+').replace(/_/g, '/');
    while (s.length % 4) s += '=';
    var bin = atob(s), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out.buffer;
  }
  function enc(buf) {
    var bytes = new Uint8Array(buf), bin = '';
    for (var i = 0; i < bytes.length; i++) bin += String.fromCharCode(bytes[i]);
    return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }

  function creationOptions(pk) {
    pk.challenge = dec(pk.challenge);
    pk.user.id = dec(pk.user.id);
    (pk.excludeCredentials || []).forEach(function (c) { c.id = dec(c.id); });
    return pk;
  }
  function requestOptions(pk) {
    pk.challenge = dec(pk.challenge);
    (pk.allowCredentials || []).forEach(function (c) { c.id = dec(c.id); });
    return pk;
  }

  // credentialJSON is the PublicKeyCredential as the server reads it.
  function credentialJSON(cred) {
    var r = cred.response, out = {
      id: cred.id, rawId: enc(cred.rawId), type: cred.type,
      authenticatorAttachment: cred.authenticatorAttachment || undefined,
      clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {},
      response: { clientDataJSON: enc(r.clientDataJSON) }
    };
    if (r.attestationObject) {
      out.response.attestationObject = enc(r.attestationObject);
      out.response.transports = r.getTransports ? r.getTransports() : [];
    } else {
      out.response.authenticatorData = enc(r.authenticatorData);
      out.response.signature = enc(r.signature);
      if (r.userHandle) out.response.userHandle = enc(r.userHandle);
    }
    return JSON.stringify(out);
  }

  function say(box, msg) {
    if (!box) return;
    box.textContent = msg;
    box.hidden = !msg;
  }

  function words(err) {
    if (err && err.name === 'NotAllowedError') return 'The passkey request was cancelled or timed out.';
    if (err && err.name === 'InvalidStateError') return 'This device already has a passkey for your account.';
    if (err && err.name === 'SecurityError') return 'Passkeys do not work on this address.';
    if (err && err.message && err.fromServer) return err.message;
    return 'Something went wrong with the passkey. Please try again.';
  }

  // post sends a same-origin JSON request with the page's CSRF token and
  // returns the JSON answer, or throws the answer's message.
  function post(url, csrf, headers, body) {
    var h = { 'X-CSRF-Token': csrf, 'Content-Type': 'application/json' };
    for (var k in headers) h[k] = headers[k];
    return fetch(url, { method: 'POST', credentials: 'same-origin', headers: h, body: body || '{}' })
      .then(function (res) {
        return res.json().catch(function () { return {}; }).then(function (j) {
          if (!res.ok) {
            var e = new Error(j.message || 'The server refused the request.');
            e.fromServer = true;
            throw e;
          }
          return j;
        });
      });
  }

  function hasWebAuthn() { return !!(window.PublicKeyCredential && navigator.credentials); }

  // Sign-in on the login page.
  function signin(box) {
    var form = box.querySelector('form'), field = form.querySelector('input[name=credential]');
    var button = box.querySelector('button'), errBox = box.querySelector('[data-passkey-error]');
    var url = box.getAttribute('data-options'), csrf = box.getAttribute('data-csrf');
    var pending = null;
    if (!hasWebAuthn()) { box.hidden = true; return; }
    box.hidden = false;

    function finish(cred) {
      field.value = credentialJSON(cred);
      form.submit();
    }
    button.addEventListener('click', function () {
      if (pending) pending.abort(); // a button press takes over from autofill
      pending = null;
      say(errBox, '');
      button.disabled = true;
      post(url, csrf).then(function (opts) {
        return navigator.credentials.get({ publicKey: requestOptions(opts.publicKey) });
      }).then(finish).catch(function (err) {
        button.disabled = false;
        say(errBox, words(err));
      });
    });

    // Autofill (conditional mediation): the username field offers the
    // site's passkeys where the browser supports it.
    var username = document.querySelector('input[name=username]');
    if (!username || !PublicKeyCredential.isConditionalMediationAvailable) return;
    PublicKeyCredential.isConditionalMediationAvailable().then(function (ok) {
      if (!ok) return;
      var ac = username.getAttribute('autocomplete') || 'username';
      if (ac.indexOf('webauthn') < 0) username.setAttribute('autocomplete', ac + ' webauthn');
      var ctl = new AbortController();
      pending = ctl;
      return post(url + '?mediation=conditional', csrf).then(function (opts) {
        if (ctl.signal.aborted) return null;
        return navigator.credentials.get({ publicKey: requestOptions(opts.publicKey), mediation: 'conditional', signal: ctl.signal });
      }).then(function (cred) { if (cred) finish(cred); });
    }).catch(function () { /* autofill is optional: the button still works */ });
  }

  // Enrolment on the account page, or with an enrolment link (the token
  // is in the link's fragment, never sent in a URL).
  function enrol(box) {
    var button = box.querySelector('button'), errBox = box.querySelector('[data-passkey-error]');
    var done = box.querySelector('[data-passkey-done]');
    var csrf = box.getAttribute('data-csrf'), headers = {};
    if (box.hasAttribute('data-link')) {
      var token = location.hash.slice(1);
      if (!token) { say(errBox, 'This enrolment link is incomplete. Open the whole link you were sent.'); button.disabled = true; return; }
      headers['X-Passkey-Link'] = token;
    }
    if (!hasWebAuthn()) { say(errBox, 'This browser does not support passkeys.'); button.disabled = true; return; }
    button.addEventListener('click', function () {
      say(errBox, '');
      button.disabled = true;
      post(box.getAttribute('data-options'), csrf, headers).then(function (opts) {
        return navigator.credentials.create({ publicKey: creationOptions(opts.publicKey) });
      }).then(function (cred) {
        var nameField = box.querySelector('input[name=name]');
        var body = JSON.stringify({ credential: JSON.parse(credentialJSON(cred)), name: nameField ? nameField.value : '' });
        return post(box.getAttribute('data-finish'), csrf, headers, body);
      }).then(function () {
        if (done) { done.hidden = false; button.hidden = true; return; }
        location.assign(location.pathname + '?passkey=added');
      }).catch(function (err) {
        button.disabled = false;
        say(errBox, words(err));
      });
    });
  }

  document.querySelectorAll('[data-passkey-signin]').forEach(signin);
  document.querySelectorAll('[data-passkey-enrol]').forEach(enrol);
})();
