// Schedules in words: an interval ("10 min", "1 h 30 min"), what a schedule does (its `action`,
// which arrives as `unknown`), and which form control a server's 400 message is about
// ("cron: not a cron expression …" names `cron`).
import type { Schedule, ScheduleAction } from '@edgent/client';
import { records, str } from './parts';

const UNITS: ReadonlyArray<[number, string]> = [
  [86_400_000, 'day'],
  [3_600_000, 'h'],
  [60_000, 'min'],
  [1000, 's'],
];

/** An interval in ms as people say it: `10 min`, `1 h 30 min`, `2 days`. */
export function interval(ms: number): string {
  let rest = Math.max(0, Math.round(ms));
  const parts: string[] = [];
  for (const [size, unit] of UNITS) {
    const n = Math.floor(rest / size);
    if (n === 0) continue;
    parts.push(unit === 'day' ? `${n} day${n === 1 ? '' : 's'}` : `${n} ${unit}`);
    rest -= n * size;
  }
  if (rest > 0 || parts.length === 0) parts.push(`${rest} ms`);
  return parts.join(' ');
}

/** The stored `once`/`every` spec (ms, as text) as a number; `null` when it is not one. */
export function specMs(schedule: Schedule): number | null {
  const n = Number(schedule.spec);
  return schedule.spec.trim() !== '' && Number.isFinite(n) ? n : null;
}

/** What a schedule does; `null` for a shape this UI does not know. */
export function actionOf(value: unknown): ScheduleAction | null {
  const fields = records([value])[0];
  if (!fields) return null;
  const message = str(fields.message);
  if (message !== null) return { message };
  const tool = str(fields.tool);
  if (tool === null) return null;
  return { tool, arguments: records([fields.arguments])[0] ?? {} };
}

/** A short label for a schedule in button names and notices: its name, else its id's start. */
export function scheduleLabel(schedule: Schedule): string {
  return schedule.name?.trim() || schedule.id.slice(0, 8);
}

/** The request fields the form has a control for. */
export type SpecField = 'at' | 'delay_seconds' | 'every_seconds' | 'cron' | 'message' | 'name';

/** The field a server message names (`cron: …`), or `null` for one about the request as a whole. */
export function fieldOfMessage(message: string): SpecField | null {
  const m = /^(at|delay_seconds|every_seconds|cron|message|name): /.exec(message);
  return m ? (m[1] as SpecField) : null;
}
