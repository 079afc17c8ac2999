/**
 * One kind of session made of several providers' kinds: the configuration names the provider and carries its
 * options, and the fingerprint includes the provider.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type { Kind, KindsConfig } from "../../SessionRegistry.ts"
import { InvalidConfig } from "../../TetherError.ts"
import { shape } from "./fingerprint.ts"

/**
 * The provider's name (URI-encoded, so it holds no `:`), a colon, and the provider's fingerprint of its options:
 * readable in a `SessionConflict`, and never equal for two providers.
 */
const tag = (provider: string, fingerprint: string): string => `${encodeURIComponent(provider)}:${fingerprint}`

export const kinds = <Kinds extends Record<string, Kind.Any>>(byProvider: Kinds): Kind<
  KindsConfig<Kinds>,
  Kind.StartError<Kinds[keyof Kinds]> | InvalidConfig,
  Kind.Services<Kinds[keyof Kinds]>,
  Kind.Result<Kinds[keyof Kinds]>,
  Kind.TurnError<Kinds[keyof Kinds]>
> => {
  // Each member kind, seen as taking its own options: `KindsConfig` pairs them with the provider's name.
  type Member = Kind<
    unknown,
    Kind.StartError<Kinds[keyof Kinds]>,
    Kind.Services<Kinds[keyof Kinds]>,
    Kind.Result<Kinds[keyof Kinds]>,
    Kind.TurnError<Kinds[keyof Kinds]>
  >
  // Own keys only: a configuration read from outside (a request body) must not reach `toString` or `__proto__`.
  const kindOf = (provider: string): Member | undefined =>
    Object.hasOwn(byProvider, provider) ? byProvider[provider] as Member : undefined
  const unknownProvider = (provider: string) =>
    new InvalidConfig({
      problems: [`unknown provider ${JSON.stringify(provider)} (known: ${Object.keys(byProvider).join(", ")})`]
    })
  return {
    acquire: (id, config) => {
      const kind = kindOf(config.provider)
      return kind === undefined ? Effect.fail(unknownProvider(config.provider)) : kind.acquire(id, config.options)
    },
    fingerprint: (config) => {
      const kind = kindOf(config.provider)
      // An unknown provider matches no live session; `acquire` refuses it, as a start that fails.
      return tag(config.provider, kind === undefined ? "" : kind.fingerprint(config.options))
    },
    warm: {
      key: (config) => {
        const kind = kindOf(config.provider)
        return tag(config.provider, kind === undefined ? "" : (kind.warm?.key ?? shape)(config.options))
      },
      // Same key, so same provider.
      adapt: (session, from, to) => kindOf(to.provider)?.warm?.adapt(session, from.options, to.options) ?? Effect.void
    }
  }
}
