//! The inputs every mutation starts from: the repository's own examples, so the fuzzer
//! begins from documents the loaders accept and spends its time near the code paths that
//! matter. Compiled in (`include_str!`), so a run needs no files and every machine starts
//! from the same seeds.

use crate::Target;

/// The example configs (`config/*.yaml`, the broken one included: its errors are a path too)
/// and the built-in simulate example's config.
pub const CONFIGS: &[&str] = &[
    include_str!("../../../config/default.yaml"),
    include_str!("../../../config/bin-packing.yaml"),
    include_str!("../../../config/broken-example.yaml"),
    include_str!("../../../config/coscheduling.yaml"),
    include_str!("../../../config/kube-scheduler-1.37.yaml"),
    include_str!("../../../config/runtimeclass-sandboxes.yaml"),
    scheduler_core::simulate::CASE_STUDY_CONFIG,
];

/// The built-in simulate example's cluster, small dumps in the shape of simulate's tests
/// (DRA, gangs, preemption with a PDB, storage capacity), and the controller's JSON test
/// objects (a dump may be JSON).
pub const DUMPS: &[&str] = &[
    scheduler_core::simulate::CASE_STUDY_CLUSTER,
    include_str!("../seeds/dump/dra.yaml"),
    include_str!("../seeds/dump/gang.yaml"),
    include_str!("../seeds/dump/preemption.yaml"),
    include_str!("../seeds/dump/capacity.yaml"),
    include_str!("../../controller/src/informers/lean/testdata/rich-pod.json"),
    include_str!("../../controller/src/informers/lean/testdata/served-node.json"),
];

/// CEL selectors from the DRA tests, one a line.
const CEL: &str = include_str!("../seeds/cel.txt");

/// AdmissionReviews in the shape of scheduling-policy's webhook tests.
pub const ADMISSION_REVIEWS: &[&str] = &[
    include_str!("../seeds/admission/create-plain.json"),
    include_str!("../seeds/admission/create-violations.json"),
    include_str!("../seeds/admission/create-kube-system.json"),
    include_str!("../seeds/admission/create-multiarch.json"),
    include_str!("../seeds/admission/create-priority.json"),
    include_str!("../seeds/admission/create-tolerations.json"),
    include_str!("../seeds/admission/update-nodeselector.json"),
    include_str!("../seeds/admission/update-same.json"),
    include_str!("../seeds/admission/delete.json"),
    include_str!("../seeds/admission/create-subresource.json"),
];

/// The SchedulingPolicies the admission target's webhook holds: the proposal's
/// `restricted` and `privileged` and three of its examples (as the webhook tests).
pub const POLICIES: &str = include_str!("../seeds/policies.yaml");

/// The CEL seeds.
pub fn cel() -> Vec<&'static str> {
    CEL.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// A target's seeds as bytes.
pub fn for_target(t: Target) -> Vec<Vec<u8>> {
    let texts: Vec<&str> = match t {
        Target::Config => CONFIGS.to_vec(),
        Target::Dump => DUMPS.to_vec(),
        Target::Cel => cel(),
        Target::Admission => ADMISSION_REVIEWS.to_vec(),
    };
    texts.into_iter().map(|s| s.as_bytes().to_vec()).collect()
}
