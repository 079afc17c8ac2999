/**
 * Fixed dispositions of error classes, set once on the class's prototype: most errors always mean the same thing
 * for the host (an `ExecutableNotFound` is always safe to fall back), and only a few depend on their fields.
 *
 * @internal
 */
export const fixDisposition = (
  target: { readonly prototype: object },
  safeToFallback: boolean,
  safeToRequeue: boolean,
  deliveryUncertain: boolean
): void => {
  Object.defineProperties(target.prototype, {
    safeToFallback: { value: safeToFallback, enumerable: false },
    safeToRequeue: { value: safeToRequeue, enumerable: false },
    deliveryUncertain: { value: deliveryUncertain, enumerable: false }
  })
}
