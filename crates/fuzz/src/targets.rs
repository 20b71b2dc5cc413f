//! The four targets: each takes one input and runs it through the code that reads that
//! kind of input in production. A target returns whether the input was accepted (for the
//! run's statistics) and panics only when an invariant breaks; a panic, a hang or an abort
//! is what the runner reports.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use scheduler_core::config::{self, Loaded};
use scheduler_core::policy::{self, GlobalDefaultClass};
use scheduler_core::simulate;
use scheduler_core::types::dra::cel::{AttrValue, CelSelector, device_value};
use scheduler_core::types::parse_quantity;
use scheduling_policy::authz::{Authorizer, ServiceAccount};
use scheduling_policy::informer::Policies;
use scheduling_policy::webhook::{self, PriorityClassLookup, Webhook};

/// Whether the code under test took the input or refused it (both are fine).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Accepted,
    Refused,
}

fn outcome(ok: bool) -> Outcome {
    if ok {
        Outcome::Accepted
    } else {
        Outcome::Refused
    }
}

/// (1) A scheduler config: `config::load_str`, then the errors or warnings as every command
/// prints them.
pub fn config(text: &str) -> Outcome {
    match config::load_str(text, "fuzz.yaml") {
        Ok(loaded) => {
            for w in &loaded.warnings {
                let _ = w.to_string();
            }
            Outcome::Accepted
        }
        Err(errors) => {
            assert!(!errors.is_empty(), "a config refused without an error");
            let _ = errors.to_string();
            Outcome::Refused
        }
    }
}

/// The config `ferrosched simulate` runs a dump with when given none.
fn default_config() -> &'static Loaded {
    static DEFAULT: OnceLock<Loaded> = OnceLock::new();
    DEFAULT.get_or_init(|| config::from_flags(None, None).expect("the default config loads"))
}

/// (2) A cluster dump: `simulate::load_str`, and when it loads, `simulate::run` with the
/// default config.
pub fn dump(text: &str) -> Outcome {
    match simulate::load_str(text, "fuzz.yaml") {
        Ok(objects) => match simulate::run(&objects, default_config(), 1) {
            Ok(report) => {
                let _ = report.scheduled();
                Outcome::Accepted
            }
            Err(e) => {
                let _ = e.to_string();
                Outcome::Refused
            }
        },
        Err(errors) => {
            assert!(!errors.is_empty(), "a dump refused without an error");
            for e in &errors {
                let _ = e.to_string();
            }
            Outcome::Refused
        }
    }
}

/// The devices every selector is evaluated against: a GPU like the DRA tests', a device
/// without attributes or capacity, and one with values at their limits; plus one made
/// from the input's own hash, so a replay from the saved file evaluates the same devices.
fn devices(text: &str) -> Vec<cel::objects::Value> {
    let q = |s: &str| parse_quantity(s).expect("a valid quantity");
    let gpu_attrs: BTreeMap<String, AttrValue> = [
        ("model".to_string(), AttrValue::String("a100".into())),
        ("cores".to_string(), AttrValue::Int(108)),
        ("mig".to_string(), AttrValue::Bool(true)),
        (
            "driverVersion".to_string(),
            AttrValue::Version("1.2.3".into()),
        ),
        ("numa.example.com/node".to_string(), AttrValue::Int(1)),
    ]
    .into();
    let gpu_cap: BTreeMap<String, _> = [("memory".to_string(), q("40Gi"))].into();
    let edge_attrs: BTreeMap<String, AttrValue> = [
        ("min".to_string(), AttrValue::Int(i64::MIN)),
        ("max".to_string(), AttrValue::Int(i64::MAX)),
        ("empty".to_string(), AttrValue::String(String::new())),
        ("long".to_string(), AttrValue::String("x".repeat(64))),
        ("badVersion".to_string(), AttrValue::Version("1.2".into())),
        (
            "preRelease".to_string(),
            AttrValue::Version("1.0.0-alpha.1+build.5".into()),
        ),
        ("other.example.com/flag".to_string(), AttrValue::Bool(false)),
    ]
    .into();
    let edge_cap: BTreeMap<String, _> = [
        ("memory".to_string(), q("8Ei")),
        ("tiny".to_string(), q("1n")),
        ("zero".to_string(), q("0")),
        ("milli".to_string(), q("1500m")),
    ]
    .into();
    let mut rng = fastrand::Rng::with_seed(crate::hash(text.as_bytes()));
    let mut own_attrs = BTreeMap::new();
    let mut own_cap = BTreeMap::new();
    for i in 0..rng.usize(..6) {
        let name = [
            "model",
            "cores",
            "mig",
            "driverVersion",
            "x",
            "gpu.example.com/x",
        ][rng.usize(..6)]
        .to_string();
        let v = match rng.u8(..4) {
            0 => AttrValue::Int(rng.i64(..)),
            1 => AttrValue::Bool(rng.bool()),
            2 => AttrValue::String(format!("s{i}")),
            _ => AttrValue::Version(format!("{}.{}.{}", rng.u8(..), rng.u8(..), rng.u8(..))),
        };
        own_attrs.insert(name, v);
        own_cap.insert(
            ["memory", "cores", "bandwidth"][rng.usize(..3)].to_string(),
            q(["1", "1Gi", "100m", "1e3", "999Ei"][rng.usize(..5)]),
        );
    }
    vec![
        device_value("gpu.example.com", &gpu_attrs, &gpu_cap),
        device_value("nic.example.com", &BTreeMap::new(), &BTreeMap::new()),
        device_value("gpu.example.com", &edge_attrs, &edge_cap),
        device_value("gpu.example.com", &own_attrs, &own_cap),
    ]
}

/// (3) A DRA CEL selector: compiled as a DeviceClass's or claim's selector is, then
/// evaluated against a few devices (under the cost limit alone: no deadline, so a cost
/// limit that fails to stop an evaluation shows as a hang).
pub fn cel(text: &str) -> Outcome {
    let selector = CelSelector::compile(text);
    let compiled = selector.compile_error().is_none();
    let mut matched = false;
    for d in devices(text) {
        match selector.matches(&d) {
            Ok(m) => matched |= m,
            Err(e) => assert!(
                e.starts_with("CEL compile error") || e.starts_with("CEL runtime error"),
                "an evaluation error without its prefix: {e}"
            ),
        }
    }
    outcome(compiled && matched)
}

/// RBAC as the webhook tests grant it: `restricted` to every service account, the examples
/// to one account each, `privileged` to kube-system's.
struct FakeRbac;

const GRANTS: &[(&str, &str)] = &[
    ("*/default", "restricted"),
    ("*/arch", "restricted"),
    ("*/arch", "multiarch"),
    ("*/gold", "single-priority"),
    ("*/gold", "restricted"),
    ("*/tolerant", "fine-tolerations"),
    ("kube-system/default", "privileged"),
];

impl Authorizer for FakeRbac {
    fn may_use<'a>(
        &'a self,
        sa: &'a ServiceAccount,
        policy: &'a str,
    ) -> BoxFuture<'a, controller::Result<bool>> {
        let any_ns = format!("*/{}", sa.name);
        let full = sa.to_string();
        let allowed = GRANTS
            .iter()
            .any(|(s, p)| (*s == full || *s == any_ns) && *p == policy);
        Box::pin(async move { Ok(allowed) })
    }
}

/// `cluster-default` is the cluster's globalDefault PriorityClass.
struct FakeClasses;

impl PriorityClassLookup for FakeClasses {
    fn global_default<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, controller::Result<Option<GlobalDefaultClass>>> {
        Box::pin(async move {
            Ok((name == "cluster-default").then(|| GlobalDefaultClass {
                name: name.to_string(),
                preemption_policy: Some("PreemptLowerPriority".into()),
            }))
        })
    }
}

fn hook() -> &'static Webhook {
    static HOOK: OnceLock<Webhook> = OnceLock::new();
    HOOK.get_or_init(|| {
        let policies = Arc::new(Policies::default());
        policies
            .store
            .replace_all(policy::parse(crate::seeds::POLICIES).expect("the seed policies parse"));
        policies.mark_synced();
        Webhook {
            policies,
            authz: Arc::new(FakeRbac),
            priority_classes: Arc::new(FakeClasses),
        }
    })
}

/// (4) An AdmissionReview body: what the webhook's handler does with it short of HTTP —
/// `parse_review`, then `/validate` and `/mutate`'s decisions (with RBAC and
/// PriorityClasses answered by fakes), then the answer as it is sent back.
pub fn admission(body: &[u8]) -> Outcome {
    assert!(body.len() <= webhook::MAX_REQUEST_BODY);
    let req = match webhook::parse_review(body) {
        Ok(r) => r,
        Err(e) => {
            assert!(!e.is_empty());
            return Outcome::Refused;
        }
    };
    let hook = hook();
    let mut decided = false;
    // An Err is a 500 (failurePolicy applies): allowed, but counted as refused.
    let answers = [
        futures::executor::block_on(hook.validate(&req)),
        futures::executor::block_on(hook.mutate(&req)),
    ];
    for resp in answers.into_iter().flatten() {
        let review = webhook::review_json(resp);
        assert_eq!(
            review["response"]["uid"].as_str(),
            Some(req.uid.as_str()),
            "the answer must carry the request's uid: {review}"
        );
        decided = true;
    }
    outcome(decided)
}
