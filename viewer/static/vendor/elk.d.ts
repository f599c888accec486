// Types for vendor/elk.js (TensorViz's own: what the layout worker uses of elkjs 0.12.1's
// API, read from its documentation), so that `tsc --checkJs` reads these instead of the
// 6,770-line bundle.

export interface ElkPoint { x: number; y: number }
export interface ElkSection { startPoint: ElkPoint; endPoint: ElkPoint; bendPoints?: ElkPoint[] }
export interface ElkEdge {
  id: string;
  sources: string[];
  targets: string[];
  sections?: ElkSection[];
  layoutOptions?: Record<string, string>;
}
export interface ElkNode {
  id: string;
  x?: number;
  y?: number;
  width?: number;
  height?: number;
  layoutOptions?: Record<string, string>;
  children?: ElkNode[];
  edges?: ElkEdge[];
}
export declare class ElkApi {
  constructor(options?: { workerUrl?: string });
  layout(graph: ElkNode, options?: { layoutOptions?: Record<string, string>; logging?: boolean;
    measureExecutionTime?: boolean }): Promise<ElkNode>;
}
export declare const ELK_VERSION: string;
declare const ELK: typeof ElkApi;
export default ELK;
