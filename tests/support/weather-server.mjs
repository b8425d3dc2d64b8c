// weather-server.mjs — a stand-in for OpenWeatherMap's current-weather API, for tests of the
// `get_weather` tool. Listens on 127.0.0.1 inside the test process; point the Worker's
// WEATHER_API_URL at `url`. Node built-ins only.
//
//   GET /weather?q=<city>&units=metric|imperial&appid=<key>
//
// By default it answers 200 with an OpenWeatherMap-shaped body for the city asked for (the
// temperature depends on the units). `reply(fn)` replaces the answer for the following
// requests: `fn(request)` returns `{ status, body, headers? }` (body: object → JSON, string → as is) or
// `{ hang: true }` (never answered; close() cuts it) or `{ destroy: true }` (the connection
// drops without an answer) or `{ endless: true }` (200 and a body that never ends). Every request is recorded in `requests`
// as `{ method, path, query, url, at }`, with the query decoded into an object.

import http from 'node:http';

export const CELSIUS = { temp: 21.5, humidity: 64, description: 'light rain' };
export const FAHRENHEIT = { temp: 70.7, humidity: 64, description: 'light rain' };

/** The default answer: a plausible OpenWeatherMap body for the requested city and units. */
export function defaultReply(request) {
  const w = request.query.units === 'imperial' ? FAHRENHEIT : CELSIUS;
  return {
    status: 200,
    body: {
      coord: { lon: -9.13, lat: 38.71 },
      weather: [{ id: 500, main: 'Rain', description: w.description, icon: '10d' }],
      main: { temp: w.temp, feels_like: w.temp - 1, pressure: 1012, humidity: w.humidity },
      name: request.query.q?.split(',')[0] ?? '',
      cod: 200,
    },
  };
}

/** Starts the stand-in on 127.0.0.1 (`port` 0: any free port). */
export async function startWeatherServer({ port = 0 } = {}) {
  const requests = [];
  const sockets = new Set();
  let handler = defaultReply;

  const server = http.createServer(async (req, res) => {
    res.on('error', () => {});
    const parsed = new URL(req.url, 'http://localhost');
    const request = {
      method: req.method,
      path: parsed.pathname,
      query: Object.fromEntries(parsed.searchParams),
      url: req.url,
      at: Date.now(),
    };
    requests.push(request);
    if (req.method !== 'GET' || parsed.pathname !== '/weather') {
      res.writeHead(404, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ cod: '404', message: `weather-server: no route for ${req.method} ${parsed.pathname}` }));
    }
    let answer;
    try {
      answer = await handler(request);
    } catch (err) {
      answer = { status: 599, body: { message: `weather-server: handler threw ${err.message}` } };
    }
    if (answer.hang) return; // never answered
    if (answer.destroy) return req.socket.destroy(); // the connection drops without an answer
    if (answer.endless) {
      // 200, then 64 KiB chunks for as long as the client reads (a body that never ends).
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      return pump();
    }
    const body = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body ?? {});
    res.writeHead(answer.status ?? 200, { 'content-type': 'application/json', ...(answer.headers ?? {}) });
    res.end(body);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });

  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    /** Answers the following requests with `fn(request)`; `reply()` restores the default. */
    reply(fn = defaultReply) {
      handler = fn;
    },
    /** Default answers and no recorded requests. */
    reset() {
      handler = defaultReply;
      requests.length = 0;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
