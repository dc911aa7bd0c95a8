// An MCP client transport over a Unix or TCP stream socket: the SDK's own
// stdio framing (ReadBuffer, serializeMessage: one JSON-RPC message per
// line) on a net.Socket. A copy of tests/interop/bus/socket_transport.mjs:
// this folder pins its own SDK, so it does not import from that one.
import net from "node:net";
import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";

export class SocketClientTransport {
  /** @param {{path: string} | {host: string, port: number}} address */
  constructor(address) {
    this._address = address;
    this._readBuffer = new ReadBuffer();
    this._socket = undefined;
  }

  start() {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection(this._address);
      socket.once("connect", () => {
        socket.off("error", reject);
        socket.on("error", (error) => this.onerror?.(error));
        resolve();
      });
      socket.once("error", reject);
      socket.on("data", (chunk) => {
        this._readBuffer.append(chunk);
        for (;;) {
          let message;
          try {
            message = this._readBuffer.readMessage();
          } catch (error) {
            this.onerror?.(error);
            continue;
          }
          if (message === null) break;
          this.onmessage?.(message);
        }
      });
      socket.on("close", () => {
        this._socket = undefined;
        this._readBuffer.clear();
        this.onclose?.();
      });
      this._socket = socket;
    });
  }

  send(message) {
    return new Promise((resolve, reject) => {
      if (!this._socket) {
        reject(new Error("Not connected"));
        return;
      }
      this._socket.write(serializeMessage(message), (error) => (error ? reject(error) : resolve()));
    });
  }

  async close() {
    const socket = this._socket;
    if (!socket) return;
    await new Promise((resolve) => {
      socket.once("close", resolve);
      socket.end();
    });
  }
}
