/// <reference types="vite/client" />

interface ImportMetaEnv {
  /** The Worker's origin when the app is hosted elsewhere (default: the page's own origin). */
  readonly VITE_EDGENT_URL?: string;
}
