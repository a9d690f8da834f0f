// Loopback reverse proxy for the MCP conformance suite, which cannot send an Authorization
// header: adds `Authorization: Bearer <token>` read from a token file, so the bearer never
// appears in any process's argv or environment (the shared mcp-auth-proxy.mjs takes it as an
// argument). Forwards method, path and every header unchanged (Host and Origin preserved, so
// the DNS-rebinding scenario still tests the daemon) and streams bodies both ways.
// Usage: node token-file-proxy.mjs LISTEN_PORT UPSTREAM_URL TOKEN_FILE
import http from 'node:http';
import { readFileSync } from 'node:fs';

const [listenPort, upstream, tokenFile] = process.argv.slice(2);
const up = new URL(upstream);
const authorization = `Bearer ${readFileSync(tokenFile, 'utf8').trim()}`;

http
  .createServer((req, res) => {
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
  })
  .listen(Number(listenPort), '127.0.0.1', () =>
    console.error(`token-file-proxy 127.0.0.1:${listenPort} -> ${upstream}`)
  );
