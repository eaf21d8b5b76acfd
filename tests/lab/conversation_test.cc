// The one way experiments give a conversation back (src/lab/conversation.h's Scope), against a
// fresh Session's full prefill under the same interventions, on the tiny synthetic model.
#include "lab/conversation.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "model/session.h"
#include "tools/common/synthetic_model.h"

namespace gpt2_test {
namespace {

TEST_CASE("a Scope gives the conversation back as it was, whatever ran in between", "[lab]") {
  const std::vector<uint8_t> bytes =
      gpt2::SyntheticModelBytes(gpt2::TinyTestConfig(), gpt2::TensorType::kF32, nullptr);
  std::shared_ptr<const gpt2::GgufFile> file = gpt2::GgufFile::Parse(bytes.data(), bytes.size());
  const std::unique_ptr<gpt2::Model> model = gpt2::Model::FromGguf(file);
  const int V = model->config().n_vocab;
  const std::vector<int> ids = {5, 17, 300, 2, 9, 41}, other = {7, 7, 8};
  gpt2::Interventions skip;
  skip.skip_mlp = {1};
  gpt2::Conversation c(*model, 1);
  c.SetInterventions(skip);
  c.SetCapture(true);
  c.Run({5, 17, 300});
  c.Run({2, 9, 41});  // a prompt of 3, then 3 more
  c.set_unrun(11);

  for (bool unrecorded : {false, true}) {
    {
      gpt2::Conversation::Scope scope(c);
      c.SetInterventions(gpt2::Interventions());
      c.SetCapture(false);
      if (unrecorded) {
        c.UnrecordedSession().Prefill(other.data(), 3);
      } else {
        c.Restart(other);
      }
    }  // given back by the destructor
    INFO("unrecorded " << unrecorded);
    CHECK(c.tokens() == ids);
    CHECK(c.prompt() == std::vector<int>({5, 17, 300}));
    CHECK(c.unrun() == 11);
    CHECK(c.capture_on());
    REQUIRE(c.capture().n_positions() == 6);
    gpt2::Session fresh(*model);
    gpt2::RunOptions run;
    run.interventions = &skip;
    const float* want = fresh.Prefill(ids.data(), 6, run);
    const std::vector<float> got = c.FinalProbs(5);
    for (int id : {0, 5, 464}) {
      CHECK(std::log(double(got[id])) == Approx(gpt2::LogProbability(want, V, id)).margin(1e-5));
    }
  }

  // Uncaptured with capture off: given back uncaptured, under the interventions it had.
  c.Reset();
  c.SetCapture(false);
  c.Run(ids);
  c.WithRestore([&] { return c.UnrecordedSession().Prefill(other.data(), 3); });
  CHECK(c.tokens() == ids);
  CHECK(c.capture().n_positions() == 0);
  CHECK(c.interventions().skip_mlp == std::vector<int>({1}));
}

}  // namespace
}  // namespace gpt2_test
