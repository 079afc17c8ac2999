/**
 * Facts about the platform the transport runs on, decided once.
 */

/** True on Windows: no sessions, no signals to a process tree, no /proc, no watchdog. @internal */
export const isWindows: boolean = process.platform === "win32"
