// The flags of a job on the cluster, declared once: `ssd probe-links` takes where and how the job
// runs (ClusterFlags: the distributed run, the backend); `ssd generate`, `ssd serve` and `ssd
// bench` take that and what every decoding run needs (JobFlags: the target model, the drafters'
// options). A command's argument struct derives from one of them, so its code reads args.dist,
// args.target and so on, and its visit() hands its own flags to visit_around():
//
//   struct GenerateArgs : JobFlags {
//     std::string prompt;
//     template <class V> void visit(V&& v) {
//       visit_around(v, [&] { v(prompt, "prompt", "prompt text"); });
//     }
//   };
//
// The order, which --help and the resolved config follow: the model, the command's own flags,
// the drafters' options, the distributed run, the backend.
#pragma once

#include "launch/cli/backend_flags.h"
#include "launch/cli/distributed_flags.h"
#include "launch/cli/drafter_flags.h"
#include "launch/cli/model_flags.h"

namespace ssd {

struct ClusterFlags {
  DistributedConfig dist;
  BackendFlags backend;

  // The command's own flags (own()), then the distributed run's and the backend's.
  template <class V, class Own>
  void visit_around(V&& v, Own&& own) {
    own();
    visit_flags(dist, v);
    backend.visit(v);
  }
};

struct JobFlags : ClusterFlags {
  ModelFlags target;
  DrafterFlags drafter_flags;

  // The model, the command's own flags (own()), the drafters' options, then ClusterFlags'.
  template <class V, class Own>
  void visit_around(V&& v, Own&& own) {
    target.visit(v);
    own();
    drafter_flags.visit(v);
    ClusterFlags::visit_around(v, [] {});
  }
};

}  // namespace ssd
