import fs from 'node:fs';
import net from 'node:net';

/**
 * Below this the kernel never picks a port for an outgoing connection (Linux: the first number of
 * ip_local_port_range, 32768 by default). A port handed out from that range, free when checked,
 * can be taken by any connection the tests open before the server it is meant for binds it (the
 * Temporal dev server's web UI once lost its port that way).
 */
const EPHEMERAL_FROM = (() => {
  try {
    return Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  } catch {
    return 32_768;
  }
})();
const FROM = 10_000;

/** A port free on 127.0.0.1 now, outside the ephemeral range where there is room below it. */
export async function freePort(): Promise<number> {
  if (EPHEMERAL_FROM - FROM >= 1_000)
    for (let i = 0; i < 50; i++) {
      const port = FROM + Math.floor(Math.random() * (EPHEMERAL_FROM - FROM));
      if (await listens(port)) return port;
    }
  const port = await listens(0);
  if (!port) throw new Error('no free port on 127.0.0.1');
  return port;
}

/** The port a listener got on 127.0.0.1 (closed again), or undefined when it could not listen. */
function listens(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(undefined));
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => {
      const got = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(got));
    });
  });
}
