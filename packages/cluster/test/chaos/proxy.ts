/**
 * The chaos suite's database link: a TCP proxy on 127.0.0.1 in front of PostgreSQL, through which every node of the
 * cluster reaches it. `cut` resets every connection and refuses new ones (the database stopped) until `restore`;
 * `delay` holds every chunk that many milliseconds in each direction, in order (a slow database, or a slow network to
 * it).
 */
import { Effect } from "effect"
import * as Net from "node:net"

export interface Proxy {
  readonly port: number
  readonly cut: () => void
  readonly restore: () => void
  readonly delay: (millis: number) => void
}

/** Forwards `from` to `to`, each chunk `delay()` ms late, in order. */
const forward = (from: Net.Socket, to: Net.Socket, delay: () => number) => {
  let last = 0
  from.on("data", (chunk: Buffer) => {
    const millis = delay()
    if (millis <= 0 && last <= Date.now()) {
      to.write(chunk)
      return
    }
    const at = Math.max(Date.now() + millis, last)
    last = at
    setTimeout(() => {
      if (!to.destroyed) to.write(chunk)
    }, at - Date.now())
  })
}

/** A proxy to 127.0.0.1:`port`, closed with the scope. */
export const make = (port: number) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly proxy: Proxy; readonly server: Net.Server; readonly sockets: Set<Net.Socket> }>(
      (resume) => {
        const sockets = new Set<Net.Socket>()
        let down = false
        let millis = 0
        const server = Net.createServer((client) => {
          if (down) return void client.destroy()
          const upstream = Net.connect(port, "127.0.0.1")
          for (const socket of [client, upstream]) {
            sockets.add(socket)
            socket.setNoDelay(true)
            socket.on("close", () => sockets.delete(socket))
            socket.on("error", () => undefined)
          }
          forward(client, upstream, () => millis)
          forward(upstream, client, () => millis)
          client.on("close", () => upstream.destroy())
          upstream.on("close", () => client.destroy())
        })
        server.listen(0, "127.0.0.1", () => {
          const proxy: Proxy = {
            port: (server.address() as Net.AddressInfo).port,
            cut: () => {
              down = true
              for (const socket of sockets) socket.resetAndDestroy()
            },
            restore: () => {
              down = false
            },
            delay: (next) => {
              millis = next
            }
          }
          resume(Effect.succeed({ proxy, server, sockets }))
        })
      }
    ),
    ({ server, sockets }) =>
      Effect.callback<void>((resume) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resume(Effect.void))
      })
  ).pipe(Effect.map(({ proxy }) => proxy))
