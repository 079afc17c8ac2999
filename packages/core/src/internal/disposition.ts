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

/**
 * The disposition of the errors that end a turn after the prompt was written (the CLI exited, the session was
 * retired, an interrupt did not settle): never safe to fall back or requeue, and delivery is uncertain exactly when
 * the CLI had not acknowledged the prompt. Set once on the class's prototype, reading the instance's `acknowledged`.
 *
 * @internal
 */
export const uncertainUnlessAcknowledged = (target: { readonly prototype: object }): void => {
  Object.defineProperties(target.prototype, {
    safeToFallback: { value: false, enumerable: false },
    safeToRequeue: { value: false, enumerable: false },
    deliveryUncertain: {
      get(this: { readonly acknowledged: boolean }) {
        return !this.acknowledged
      },
      enumerable: false
    }
  })
}
