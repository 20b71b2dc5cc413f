//! One process, many profiles: schedulerName -> Framework.

use std::collections::BTreeMap;

use super::{Framework, FrameworkError, Registry};
use crate::config::ExpandedProfile;

/// The profile a pod with an empty `spec.schedulerName` belongs to.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

/// Every profile's framework, keyed by schedulerName.
#[derive(Debug, Default)]
pub struct ProfileRegistry {
    frameworks: BTreeMap<String, Framework>,
}

impl ProfileRegistry {
    /// Builds a framework per profile. Profiles must agree on QueueSort (one queue).
    pub fn new(specs: &[ExpandedProfile], registry: &Registry) -> Result<Self, FrameworkError> {
        let mut frameworks = BTreeMap::new();
        let mut queue_sort: Option<(&str, &'static str)> = None;
        for spec in specs {
            let fw = Framework::new(spec, registry)?;
            match queue_sort {
                None => queue_sort = Some((&spec.scheduler_name, fw.queue_sort_name())),
                Some((first, qs)) if qs != fw.queue_sort_name() => {
                    return Err(FrameworkError {
                        profile: spec.scheduler_name.clone(),
                        message: format!(
                            "queueSort plugin {:?} differs from {:?} of profile {first:?}; all profiles must use the same queueSort plugin",
                            fw.queue_sort_name(),
                            qs
                        ),
                    });
                }
                Some(_) => {}
            }
            if frameworks.insert(spec.scheduler_name.clone(), fw).is_some() {
                return Err(FrameworkError {
                    profile: spec.scheduler_name.clone(),
                    message: "duplicate profile".into(),
                });
            }
        }
        Ok(ProfileRegistry { frameworks })
    }

    /// The framework for a pod's `spec.schedulerName`; empty means `default-scheduler`.
    /// `None` means the pod belongs to another scheduler and must be left alone.
    pub fn for_scheduler_name(&self, scheduler_name: &str) -> Option<&Framework> {
        let name = if scheduler_name.is_empty() {
            DEFAULT_SCHEDULER_NAME
        } else {
            scheduler_name
        };
        self.frameworks.get(name)
    }

    /// Gives every profile the scheduler's extenders, called in this order each cycle.
    pub fn set_extenders(&mut self, extenders: &[std::sync::Arc<dyn super::Extender>]) {
        for fw in self.frameworks.values_mut() {
            fw.set_extenders(extenders.to_vec());
        }
    }

    pub fn handles(&self, scheduler_name: &str) -> bool {
        self.for_scheduler_name(scheduler_name).is_some()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Framework)> {
        self.frameworks.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn len(&self) -> usize {
        self.frameworks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frameworks.is_empty()
    }
}
