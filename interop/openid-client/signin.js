// Signs in to authd as a relying party built on openid-client would:
// discovery, the code flow with PKCE S256, state and nonce, the ID token
// validated by openid-client (signature with the JWKS, iss, aud, exp, nonce,
// at_hash), a retried exchange of the same code that openid-client accepts
// and that returns the identical ID token, UserInfo, and a refresh whose new
// ID token validates with the original auth_time.
//
// usage: node signin.js ISSUER CLIENT_ID REDIRECT_URI USERNAME PASSWORD
// Prints one JSON line on success; exits 1 with the reason otherwise.
'use strict';
const assert = require('node:assert/strict');
const { Issuer, generators } = require('openid-client');

const [issuerURL, clientID, redirectURI, username, password] = process.argv.slice(2);

// A browser: a cookie jar and no redirect following.
const jar = new Map();
async function browse(url, init = {}) {
  const headers = new Headers(init.headers || {});
  if (jar.size) headers.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '));
  const res = await fetch(url, { ...init, headers, redirect: 'manual' });
  for (const c of res.headers.getSetCookie()) {
    const [pair] = c.split(';');
    const i = pair.indexOf('=');
    jar.set(pair.slice(0, i), pair.slice(i + 1));
  }
  return res;
}

function unescapeHTML(s) {
  return s.replace(/&amp;/g, '&').replace(/&#43;/g, '+').replace(/&#34;/g, '"').replace(/&#39;/g, "'");
}

async function main() {
  const issuer = await Issuer.discover(issuerURL);
  assert.equal(issuer.issuer, issuerURL);
  const client = new issuer.Client({
    client_id: clientID,
    token_endpoint_auth_method: 'none',
    redirect_uris: [redirectURI],
    response_types: ['code'],
  });
  const verifier = generators.codeVerifier();
  const nonce = generators.nonce();
  const state = generators.state();
  const authURL = client.authorizationUrl({
    scope: 'openid offline_access profile',
    code_challenge: generators.codeChallenge(verifier),
    code_challenge_method: 'S256',
    state,
    nonce,
  });

  // The login page, then the login form.
  let res = await browse(authURL);
  assert.equal(res.status, 200, 'login page');
  const html = await res.text();
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(html);
  const action = /<form method="post" action="([^"]+)"/.exec(html);
  assert.ok(csrf && action, 'login form');
  res = await browse(new URL(unescapeHTML(action[1]), issuerURL), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(issuerURL).origin },
    body: new URLSearchParams({ csrf_token: csrf[1], step: 'login', username, password }),
  });
  assert.equal(res.status, 303, 'redirect to the app');
  const callback = res.headers.get('location');
  const params = client.callbackParams(callback);
  const checks = { code_verifier: verifier, state, nonce };

  const first = await client.callback(redirectURI, params, checks);
  // The retry a mobile app makes after a timeout: the same code, the same
  // verifier. openid-client validates the answer again and accepts it.
  const retried = await client.callback(redirectURI, params, checks);
  assert.equal(retried.id_token, first.id_token, 'the retried exchange returns the identical ID token');
  assert.equal(retried.access_token, first.access_token);
  assert.equal(retried.refresh_token, first.refresh_token);

  const claims = first.claims();
  assert.equal(claims.nonce, nonce);
  assert.equal(claims.azp, clientID);
  assert.ok(claims.auth_time > 0 && claims.sid, 'auth_time and sid');

  const info = await client.userinfo(first.access_token);
  assert.equal(info.sub, claims.sub, 'UserInfo sub equals the ID token sub');

  const refreshed = await client.refresh(first.refresh_token);
  const rc = refreshed.claims();
  assert.notEqual(refreshed.id_token, first.id_token);
  assert.equal(rc.sub, claims.sub);
  assert.equal(rc.auth_time, claims.auth_time, 'OIDC Core 12.2: the original auth_time');

  console.log(JSON.stringify({ ok: true, sub: claims.sub, kid: JSON.parse(Buffer.from(first.id_token.split('.')[0], 'base64url')).kid }));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
