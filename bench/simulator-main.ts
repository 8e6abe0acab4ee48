// The upstream simulator in a process of its own, so the load generator and the simulated
// upstream do not share an event loop. Prints its URL on stdout.
import { startSimulator } from '../test/upstream/simulator.ts';

const sim = await startSimulator({ apiKey: process.env.SIM_API_KEY, record: false });
process.stdout.write(`${sim.url}\n`);
process.on('SIGTERM', () => {
  sim.close().finally(() => process.exit(0));
});
