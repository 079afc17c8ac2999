/**
 * @since 0.1.0
 */
export * as ClusterRegistry from "./ClusterRegistry.ts"

/**
 * @since 0.1.0
 */
export * as NodeCluster from "./NodeCluster.ts"
