// A file read front to back in a thread of its own, for the engine's worker (worker-convert.js):
// while the engine converts a piece of a checkpoint (wasm, synchronous), this worker keeps the
// download going, so the network and the conversion overlap. Read in the converting thread, the
// download would stop at each piece: the browser's pipe from its network process holds a few
// megabytes. At most kAheadBytes are sent and not yet taken, which bounds the memory this adds.
//
// In:  {type:'open', epoch, url, offset, validator, fileSize}  read url from offset to the end
//                                (a Range request; answers with another ETag than validator
//                                fail), replacing any read before
//      {type:'taken', epoch, bytes}   the engine used that many bytes of the chunks sent
// Out: {type:'chunk', epoch, bytes: Uint8Array (transferred)}   the next bytes in order
//      {type:'end', epoch}            the end of the file
//      {type:'error', epoch, message}
// A dropped connection is resumed from where it stopped (loader.kMaxResumes times per open).

import {createLoader} from './worker-load.js';
import {FetchMsg, errorMessage} from '../shared/protocol.js';

const kAheadBytes = 64 << 20;
const kChunkBytes = 4 << 20;  // what is sent at a time (the network's chunks are ~64 kB)
const loader = createLoader({post: () => {}});

let current = null;  // {epoch, ahead, wake, abort}

self.onmessage = ({data}) => {
  if (data.type === FetchMsg.open) {
    current?.abort.abort();
    current = {epoch: data.epoch, ahead: 0, wake: null, abort: new AbortController()};
    read(current, data).catch((e) => {
      if (!current || current.epoch !== data.epoch || current.abort.signal.aborted) return;
      self.postMessage({type: FetchMsg.error, epoch: data.epoch, message: errorMessage(e)});
    });
  } else if (data.type === FetchMsg.taken && current?.epoch === data.epoch) {
    current.ahead -= data.bytes;
    current.wake?.();
  }
};

async function read(state, {epoch, url, offset, validator, fileSize}) {
  const signal = state.abort.signal;
  let pos = offset;
  let resumes = 0;
  let staged = new Uint8Array(kChunkBytes);
  let filled = 0;
  const send = async () => {
    while (state.ahead >= kAheadBytes && !signal.aborted) await new Promise((r) => { state.wake = r; });
    if (signal.aborted) return;
    const bytes = filled === staged.length ? staged : staged.slice(0, filled);
    state.ahead += filled;
    self.postMessage({type: FetchMsg.chunk, epoch, bytes}, [bytes.buffer]);
    staged = new Uint8Array(kChunkBytes);
    filled = 0;
  };
  for (;;) {
    const {response, why} = await loader.fetchRange(url, pos, null, validator, fileSize, signal, false);
    if (!response) throw new Error(`Could not download ${url} from byte ${pos}: ${why}. Load the model again.`);
    const reader = response.body.getReader();
    try {
      for (;;) {
        const {done, value} = await reader.read();
        if (done) {
          if (filled) await send();
          self.postMessage({type: FetchMsg.end, epoch});
          return;
        }
        for (let i = 0; i < value.length;) {
          const k = Math.min(value.length - i, staged.length - filled);
          staged.set(value.subarray(i, i + k), filled);
          filled += k;
          i += k;
          pos += k;
          if (filled === staged.length) await send();
          if (signal.aborted) return;
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (resumes >= loader.kMaxResumes) {
        throw new Error(`The connection dropped after ${pos} bytes of ${url} (${errorMessage(e)}), and the ` +
                        'download could not be resumed. Check your connection and load the model again.');
      }
      ++resumes;
      reader.cancel().catch(() => {});
    }
  }
}
