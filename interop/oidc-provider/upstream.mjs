// A real OpenID provider (npm oidc-provider, pinned by package-lock.json)
// on loopback, as authd's upstream in oauth's TestOIDCProviderUpstream.
//
// Usage: node upstream.mjs CALLBACK_URL...
// Prints one JSON line {"issuer": ...} once it listens on a free port.
// A line "rotate" on stdin replaces the signing key (the old kid is no
// longer published) and answers {"rotated": KID}.
//
// Accounts: any login is accepted (oidc-provider's development
// interactions); a login "sub~email~verified" gives the ID token those
// claims. Consent is granted without a prompt.
import http from 'node:http';
import readline from 'node:readline';
import { generateKeyPairSync } from 'node:crypto';
import Provider from 'oidc-provider';

const callbacks = process.argv.slice(2);
let gen = 0;
function key() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  gen += 1;
  return { ...jwk, kid: `upstream-${gen}`, alg: 'RS256', use: 'sig' };
}

function provider(issuer, jwk) {
  const p = new Provider(issuer, {
    clients: [
      { client_id: 'authd-web', client_secret: 'authd-web-secret', redirect_uris: callbacks,
        token_endpoint_auth_method: 'client_secret_post', grant_types: ['authorization_code'], response_types: ['code'] },
      { client_id: 'com.example.ios', application_type: 'native', token_endpoint_auth_method: 'none',
        redirect_uris: ['http://127.0.0.1/cb'], grant_types: ['authorization_code'], response_types: ['code'] },
      { client_id: 'com.other.app', application_type: 'native', token_endpoint_auth_method: 'none',
        redirect_uris: ['http://127.0.0.1/cb'], grant_types: ['authorization_code'], response_types: ['code'] },
      { client_id: 'com.nobody', application_type: 'native', token_endpoint_auth_method: 'none',
        redirect_uris: ['http://127.0.0.1/cb'], grant_types: ['authorization_code'], response_types: ['code'] },
    ],
    jwks: { keys: [jwk] },
    cookies: { keys: ['interop-cookie-key-0123456789'] },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    conformIdTokenClaims: false, // email in the ID token, as Apple and Google put it
    async findAccount(ctx, id) {
      const [, email, verified] = id.split('~');
      return {
        accountId: id,
        async claims() {
          const c = { sub: id };
          if (email) {
            c.email = email;
            c.email_verified = verified === 'true';
          }
          return c;
        },
      };
    },
    async loadExistingGrant(ctx) {
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
      grant.addOIDCScope('openid email profile');
      await grant.save();
      return grant;
    },
  });
  p.proxy = false;
  return p;
}

let handler = (req, res) => { res.statusCode = 503; res.end(); };
const server = http.createServer((req, res) => handler(req, res));
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  handler = provider(issuer, key()).callback();
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
  const rl = readline.createInterface({ input: process.stdin });
  rl.on('line', (line) => {
    if (line.trim() === 'rotate') {
      const k = key();
      handler = provider(issuer, k).callback();
      process.stdout.write(`${JSON.stringify({ rotated: k.kid })}\n`);
    }
  });
  rl.on('close', () => process.exit(0));
});
