// step-server.mjs — a stand-in for OpenWeatherMap's current-weather API that counts, city by
// city, how often a step's I/O ran and how each request ended. For reliability tests that kill
// the Worker while a step waits for its answer. Listens on 127.0.0.1 inside the test process;
// point the Worker's WEATHER_API_URL at `url`. Node built-ins only.
//
//   GET /weather?q=<city>&units=…&appid=…
//
// Each request is recorded in `requests` as `{ city, index, at, state, endedAt }`: `index` counts
// the city's requests from 0, `state` is `pending` (no answer yet), `answered` (the answer was sent) or
// `aborted` (the connection closed before it, e.g. because the Worker was killed). `delay(city, [ms…])`
// holds the answers to that city's requests 0, 1, … for the given times (later ones are
// immediate), so a test can kill the Worker while a step is in flight. The answer is an
// OpenWeatherMap-shaped body whose temperature is `10 + index`, so a result tells which
// request it came from.

import http from 'node:http';

/** The temperature the answer to the city's request `index` carries. */
export const temperatureOf = (index) => 10 + index;

export async function startStepServer() {
  const requests = [];
  const delays = new Map();
  const sockets = new Set();
  const timers = new Set();

  const server = http.createServer((req, res) => {
    res.on('error', () => {});
    const parsed = new URL(req.url, 'http://localhost');
    if (req.method !== 'GET' || parsed.pathname !== '/weather') {
      res.writeHead(404, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ cod: '404', message: `step-server: no route for ${req.method} ${parsed.pathname}` }));
    }
    const city = parsed.searchParams.get('q') ?? '';
    const index = requests.filter((r) => r.city === city).length;
    const record = { city, index, at: Date.now(), state: 'pending', endedAt: null };
    requests.push(record);
    res.on('close', () => {
      if (record.state === 'pending') {
        record.state = 'aborted';
        record.endedAt = Date.now();
      }
    });
    const answer = () => {
      if (record.state !== 'pending' || res.destroyed) return;
      const body = JSON.stringify({
        coord: { lon: 0, lat: 0 },
        weather: [{ id: 800, main: 'Clear', description: `reading ${index}`, icon: '01d' }],
        main: { temp: temperatureOf(index), feels_like: temperatureOf(index), pressure: 1012, humidity: 50 },
        name: city,
        cod: 200,
      });
      record.state = 'answered';
      record.endedAt = Date.now();
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    };
    const ms = delays.get(city)?.[index] ?? 0;
    if (ms > 0) {
      const timer = setTimeout(() => {
        timers.delete(timer);
        answer();
      }, ms);
      timers.add(timer);
    } else {
      answer();
    }
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });

  const of = (city) => requests.filter((r) => r.city === city);
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    /** Holds the answers to `city`'s requests 0, 1, … for `ms[0]`, `ms[1]`, … milliseconds. */
    delay(city, ms) {
      delays.set(city, ms);
    },
    /** `city`'s requests in arrival order. */
    of,
    /** How `city`'s requests ended so far: `{ total, answered, aborted, pending }`. */
    count(city) {
      const rs = of(city);
      const n = (state) => rs.filter((r) => r.state === state).length;
      return { total: rs.length, answered: n('answered'), aborted: n('aborted'), pending: n('pending') };
    },
    /** Requests still waiting for their answer. */
    pending() {
      return requests.filter((r) => r.state === 'pending');
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
