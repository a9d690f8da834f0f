// Loopback reverse proxy for the MCP conformance suite, which cannot send an Authorization
// header: adds `Authorization: Bearer <token>`, reading the token from the launch's token file on
// every request (so a rotation is picked up), and the bearer never appears in any process's argv
// or environment. Forwards method, path and every header unchanged (Host and Origin preserved, so
// the DNS-rebinding scenario still tests the daemon) and streams bodies both ways.
//
// Usage: node token-file-proxy.mjs UPSTREAM_URL TOKEN_FILE
// Listens on 127.0.0.1 port 0 and prints `listening on http://127.0.0.1:PORT` on stdout.
import http from 'node:http';
import { readFileSync } from 'node:fs';

const [upstream, tokenFile] = process.argv.slice(2);
if (!upstream || !tokenFile) {
  console.error('usage: node token-file-proxy.mjs UPSTREAM_URL TOKEN_FILE');
  process.exit(2);
}
const up = new URL(upstream);

const server = http.createServer((req, res) => {
  let authorization;
  try {
    authorization = `Bearer ${readFileSync(tokenFile, 'utf8').trim()}`;
  } catch {
    res.writeHead(502, { 'content-type': 'text/plain' });
    res.end('the token file is unreadable');
    return;
  }
  const headers = { ...req.headers, authorization };
  const preq = http.request(
    { host: up.hostname, port: up.port, method: req.method, path: req.url, headers },
    (pres) => {
      res.writeHead(pres.statusCode, pres.rawHeaders);
      pres.pipe(res);
    }
  );
  preq.on('error', () => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end('upstream unreachable');
  });
  res.on('close', () => preq.destroy());
  req.pipe(preq);
});
server.listen(0, '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${server.address().port}`);
});
