// A bench-only Worker entry: the built edgent Worker with every D1 round trip (a statement's
// first/all/run/raw, or a batch) delayed by D1_DELAY_MS, as D1 is a network hop away in
// production. bench/production.mjs copies this file into build/ and starts Miniflare on it.
import * as edgent from './index.js';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const ROUND_TRIPS = ['first', 'all', 'run', 'raw'];

function delayedStatement(statement, ms) {
  return new Proxy(statement, {
    get(target, prop) {
      if (prop === 'unwrapped') return target;
      if (prop === 'bind') return (...args) => delayedStatement(target.bind(...args), ms);
      if (ROUND_TRIPS.includes(prop)) {
        return async (...args) => {
          await sleep(ms);
          return target[prop](...args);
        };
      }
      const value = Reflect.get(target, prop);
      return typeof value === 'function' && prop !== 'constructor' ? value.bind(target) : value;
    },
  });
}

function delayedEnv(env) {
  const ms = Number(env.D1_DELAY_MS ?? 0);
  if (!ms || env.DB?.delayed) return env;
  const db = env.DB;
  env.DB = new Proxy(db, {
    get(target, prop) {
      if (prop === 'delayed') return true;
      if (prop === 'prepare') return (query) => delayedStatement(target.prepare(query), ms);
      if (prop === 'batch') {
        return async (statements) => {
          await sleep(ms);
          return target.batch(statements.map((s) => s.unwrapped ?? s));
        };
      }
      const value = Reflect.get(target, prop);
      // workers-rs checks the binding's `constructor.name`: hand that back untouched.
      return typeof value === 'function' && prop !== 'constructor' ? value.bind(target) : value;
    },
  });
  return env;
}

export class DurableThread extends edgent.DurableThread {
  constructor(ctx, env) {
    super(ctx, delayedEnv(env));
  }
}
export const RateLimiter = edgent.RateLimiter;
export default class extends edgent.default {
  fetch(request) {
    delayedEnv(this.env);
    return super.fetch(request);
  }
}
