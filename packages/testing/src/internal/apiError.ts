/**
 * The Messages API's `error.type` for an HTTP status, shared by the mock model server and the mock CLI (whose
 * synthetic API-error frames carry it as `api_error_type`).
 *
 * @internal
 */
export const apiErrorType = (status: number): string => {
  switch (status) {
    case 400:
      return "invalid_request_error"
    case 401:
      return "authentication_error"
    case 403:
      return "permission_error"
    case 404:
      return "not_found_error"
    case 413:
      return "request_too_large"
    case 429:
      return "rate_limit_error"
    case 529:
      return "overloaded_error"
    default:
      return "api_error"
  }
}
