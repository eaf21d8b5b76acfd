// Which interventions the engine computes under. The page's store owns them (interventions.js):
// every request that computes on the model carries them, and before the engine computes, the
// worker makes it hold those (engine.setInterventions; with mean ablation
// engine.setInterventionsOverPrompt, which takes the means over the prompt and runs the
// conversation again) and, for a request that reads the capture (activations, the logit lens,
// export, the SAEs' reads), runs the conversation again under them (engine.rerun, from the first
// block that changed). The engine keeps "the interventions set last", so this is where the
// worker remembers what that is: a tool never runs under interventions the page no longer
// shows. Replies echo `under`, what they ran under.

import {canonical, interventionsKey} from '../shared/interventions.js';

const kPlain = interventionsKey({});

export function createUnder() {
  let engine = null;
  // What the engine's interventions are, and which ones its captured run was made under
  // (interventionsKey; null: unknown, so set again).
  let held = kPlain;
  let captured = kPlain;

  // The conversation captured at every position (so it can run again from any block).
  const capturedWhole = () => engine.position() > 0 && engine.capturedPositions() === engine.position();

  // Makes the engine hold `iv`; with capture, also the captured run made under them. Returns the
  // canonical form of iv, which the reply echoes as `under`, and whether the capture ran again.
  function ensure(iv, {capture = false} = {}) {
    const spec = canonical(iv);
    const key = JSON.stringify(spec);
    let rerun = false;
    if (held !== key) {
      if (spec.meanAblation && engine.position() > 0) {
        // Mean ablation takes the means of the plain model over the prompt, as generation and the
        // jobs take them (lab.h MeansOf::kPrompt; engine.setInterventions would take them over the
        // capture), which runs the prompt: the engine then runs the conversation again, captured.
        engine.setInterventionsOverPrompt(spec);
        captured = key;
        rerun = true;
      } else {
        engine.setInterventions(spec);
      }
      held = key;
    }
    if (capture && captured !== key && capturedWhole()) {
      engine.rerun();
      captured = key;
      rerun = true;
    }
    return {under: spec, rerun};
  }

  return {
    attach(newEngine) {
      engine = newEngine;
      held = captured = kPlain;  // a new engine holds none
    },
    ensure,
    // A call that set `iv` itself (generation, "Run again", a job's end, attribution, head
    // detection and the quantization lens: the plain model) and left the conversation captured
    // under them.
    ran(iv) {
      held = captured = interventionsKey(iv);
    },
    // A call that ended in an unknown state (e.g. a job's end that failed): set them again next time.
    forget() {
      held = captured = null;
    },
  };
}
