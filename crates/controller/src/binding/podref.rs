//! The identity of a pod the controller acts on (also what an extension reports pods by).

use std::fmt;

use k8s_openapi::api::core::v1::ObjectReference;
use scheduler_core::types::PodInfo;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodRef {
    pub fn of(pod: &PodInfo) -> Self {
        PodRef {
            namespace: pod.namespace().to_string(),
            name: pod.name().to_string(),
            uid: pod.uid.clone(),
        }
    }

    pub(crate) fn object_reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(self.namespace.clone()),
            name: Some(self.name.clone()),
            uid: (!self.uid.is_empty()).then(|| self.uid.clone()),
            ..Default::default()
        }
    }
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}
