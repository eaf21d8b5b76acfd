// Anchor so the toolkit library is never empty while its pieces are being written.
namespace gpt2 {
namespace toolkit_internal {
int kToolkitAnchor = 0;
}
}  // namespace gpt2
