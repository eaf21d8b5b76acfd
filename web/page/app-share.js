// The page's shared links (share.js encodes and decodes them): "Share" writes the view into the
// URL (model, prompt, interventions, sampling, pick, block, head and the SAEs' sources and edits);
// opening such a link restores it with the first model, loading its SAEs and generating its text
// again. app.js hands it the store and its helpers.
import {checkAgainstModel, decodeShare, encodeShare, kSamplingFields} from './share.js';

// store, $, on: app.js's; params: the page's URL parameters; samplingDefaults: the sampling
// inputs as the markup writes them; saePanel: app-sae.js's (restoreShared, shareView);
// generate(): app.js's.
export function createSharePanel({store, $, on, params, samplingDefaults, saePanel, generate}) {
  const state = store.state;
  const shared = decodeShare(params);  // the link's view, as opened

  function addShareNote(problems) {
    if (!problems.length) return;
    const before = state.shareNote ? state.shareNote.replace(/\.$/, '') + ', ' : 'Ignored from the link: ';
    store.set({shareNote: before + problems.join(', ') + '.'});
  }

  function restoreShared(info) {
    if (!state.sharedPending) return;
    store.set({sharedPending: false});
    const {view, problems} = checkAgainstModel(shared, info);
    addShareNote(problems);
    const sampling = {...state.sampling};
    for (const {name} of kSamplingFields) {
      // A value the model rules out (shown at startup) goes back to the page's default.
      if (view.sampling[name] !== undefined) sampling[name] = String(view.sampling[name]);
      else if (shared.sampling[name] !== undefined) sampling[name] = samplingDefaults[name];
    }
    store.set({sampling, interventions: view.interventions, layer: view.block ?? state.layer, head: view.head ?? state.head});
    // The link's SAEs load (and its steering is set) before its text is generated again.
    saePanel().restoreShared(view, () => {
      if (view.restore) {
        store.set({pendingPick: view.pick});
        generate();
      }
    });
  }

  function share() {
    const {problems: saeProblems, ...saes} = saePanel().shareView();
    const view = {
      model: state.modelUrl, prompt: state.promptText, interventions: state.interventions,
      sampling: {...state.sampling},
      pick: state.picked, block: state.layer, head: state.head, ...saes,
    };
    addShareNote(saeProblems);
    const url = new URL(location.href);
    url.search = encodeShare(view);
    history.replaceState(null, '', url);
    store.set({shareUrl: url.href});
    navigator.clipboard?.writeText(url.href).catch(() => {});  // a convenience; the field shows it anyway
  }

  on($('share'), 'click', share);
  // The link's sampling settings show at once; its model-dependent parts wait for the model.
  store.set({sampling: {...state.sampling, ...Object.fromEntries(kSamplingFields.filter(({name}) => shared.sampling[name] !== undefined)
      .map(({name}) => [name, String(shared.sampling[name])]))}});
  addShareNote(shared.problems);

  return {
    render(s) {
      $('share-url').value = s.shareUrl;
      $('share-url').hidden = !s.shareUrl;
      $('share-note').textContent = s.shareNote;
      $('share-note').hidden = !s.shareNote;
      $('share').disabled = s.picked < 0;
    },
    addShareNote,
    restoreShared,
  };
}
