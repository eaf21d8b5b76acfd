// Anchor so the engine library is never empty while its pieces are being written.
namespace gpt2 {
namespace engine_internal {
int kEngineAnchor = 0;
}
}  // namespace gpt2
