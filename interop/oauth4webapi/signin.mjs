// Signs in to authd as a mobile-style public client built on oauth4webapi
// would, with every request sender-constrained by DPoP (RFC 9449): a DPoP
// key pair generated here (on a device it lives in the Secure Enclave or
// Android Keystore), a pushed authorization request (RFC 9126) with a DPoP
// proof and PKCE S256, the use_dpop_nonce round trip answered as
// oauth4webapi does, the code exchange, a retried exchange with a fresh
// proof from the same key that returns the same tokens, a DPoP refresh and
// a DPoP UserInfo call.
//
// usage: node signin.mjs ISSUER CLIENT_ID REDIRECT_URI USERNAME PASSWORD
// Prints one JSON line on success; exits 1 with the reason otherwise.
import assert from 'node:assert/strict';
import * as oauth from 'oauth4webapi';

const [issuerURL, clientID, redirectURI, username, password] = process.argv.slice(2);
const insecure = { [oauth.allowInsecureRequests]: true }; // authd on loopback http in the test

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

// retryNonce runs a request once more when authd answers use_dpop_nonce
// (RFC 9449 §8): the DPoP handle has kept the DPoP-Nonce header.
async function retryNonce(send, process) {
  try {
    return await process(await send());
  } catch (err) {
    if (!oauth.isDPoPNonceError(err)) throw err;
    return process(await send());
  }
}

async function main() {
  const issuer = new URL(issuerURL);
  const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { ...insecure, algorithm: 'oidc' }));
  assert.ok(as.dpop_signing_alg_values_supported.includes('ES256'));
  assert.ok(as.pushed_authorization_request_endpoint);
  const client = { client_id: clientID };
  const clientAuth = oauth.None();
  const DPoP = oauth.DPoP(client, await oauth.generateKeyPair('ES256'));
  const opts = { ...insecure, DPoP };

  const verifier = oauth.generateRandomCodeVerifier();
  const challenge = await oauth.calculatePKCECodeChallenge(verifier);
  const state = oauth.generateRandomState();
  const nonce = oauth.generateRandomNonce();

  // PAR with a DPoP proof (RFC 9449 §10.1): the code is bound to the key.
  const par = await retryNonce(
    () => oauth.pushedAuthorizationRequest(as, client, clientAuth, {
      redirect_uri: redirectURI, response_type: 'code', scope: 'openid offline_access profile', state, nonce,
      code_challenge: challenge, code_challenge_method: 'S256',
    }, opts),
    (res) => oauth.processPushedAuthorizationResponse(as, client, res),
  );
  assert.ok(par.request_uri.startsWith('urn:ietf:params:oauth:request_uri:'));

  // The browser: the authorization endpoint with client_id and request_uri
  // only, then the login form.
  const authURL = new URL(as.authorization_endpoint);
  authURL.searchParams.set('client_id', clientID);
  authURL.searchParams.set('request_uri', par.request_uri);
  let res = await browse(authURL);
  assert.equal(res.status, 200, 'login page');
  const html = await res.text();
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(html);
  const action = /<form method="post" action="([^"]+)"/.exec(html);
  assert.ok(csrf && action, 'login form');
  res = await browse(new URL(unescapeHTML(action[1]), issuerURL), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: issuer.origin },
    body: new URLSearchParams({ csrf_token: csrf[1], step: 'login', username, password }),
  });
  assert.equal(res.status, 303, 'redirect to the app');
  const params = oauth.validateAuthResponse(as, client, new URL(res.headers.get('location')), state);

  const exchange = () => retryNonce(
    () => oauth.authorizationCodeGrantRequest(as, client, clientAuth, params, redirectURI, verifier, opts),
    (r) => oauth.processAuthorizationCodeResponse(as, client, r, { expectedNonce: nonce, requireIdToken: true }),
  );
  const first = await exchange();
  assert.equal(first.token_type, 'dpop', 'token_type DPoP');
  // The retry a mobile app makes after a timeout: the same code and
  // verifier, a fresh proof from the same key; the same tokens.
  const retried = await exchange();
  assert.equal(retried.access_token, first.access_token, 'the retried exchange returns the same access token');
  assert.equal(retried.refresh_token, first.refresh_token);
  assert.equal(retried.id_token, first.id_token);
  const claims = oauth.getValidatedIdTokenClaims(first);

  // UserInfo with the DPoP-bound access token (RFC 9449 §7).
  const info = await retryNonce(
    () => oauth.userInfoRequest(as, client, first.access_token, opts),
    (r) => oauth.processUserInfoResponse(as, client, claims.sub, r),
  );
  assert.equal(info.sub, claims.sub);

  // A DPoP refresh: the refresh token is bound to the key.
  const refreshed = await retryNonce(
    () => oauth.refreshTokenGrantRequest(as, client, clientAuth, first.refresh_token, opts),
    (r) => oauth.processRefreshTokenResponse(as, client, r),
  );
  assert.equal(refreshed.token_type, 'dpop');
  assert.notEqual(refreshed.access_token, first.access_token);

  console.log(JSON.stringify({ ok: true, sub: claims.sub, token_type: first.token_type }));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
