/** A tiny typed event emitter: `on` returns the unsubscribe function. */
export class Emitter<Events extends object> {
  private readonly listeners = new Map<keyof Events, Set<(payload: never) => void>>();

  on<K extends keyof Events>(type: K, fn: (payload: Events[K]) => void): () => void {
    let set = this.listeners.get(type);
    if (!set) this.listeners.set(type, (set = new Set()));
    set.add(fn as (payload: never) => void);
    return () => {
      set.delete(fn as (payload: never) => void);
    };
  }

  protected emit<K extends keyof Events>(type: K, payload: Events[K]): void {
    const set = this.listeners.get(type);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        (fn as (payload: Events[K]) => void)(payload);
      } catch (e) {
        // A listener's bug must not break the socket's loop; report it out of band.
        setTimeout(() => {
          throw e;
        }, 0);
      }
    }
  }
}
