//! Carrying out the scheduling loop's decisions against the API server: the binding cycle
//! (`executor`, the Binding call in `binder`, VolumeBinding's writes in `volumes`,
//! DynamicResources' claim status writes in `claims` and its wait for device binding
//! conditions in `conditions`), pod
//! status patches (`pod_status`), PodGroup conditions (`pod_group_status`), the Kubernetes Event recorder (`event_recorder`) and the
//! identity of the pod acted on (`podref`). Runs on the async runtime, never on the
//! scheduling thread; it touches the shared state only to confirm or undo assumptions.

pub(crate) mod binder;
pub(crate) mod claims;
pub(crate) mod conditions;
pub(crate) mod event_recorder;
pub(crate) mod executor;
pub(crate) mod pod_group_status;
pub(crate) mod pod_status;
pub mod podref;
pub(crate) mod volumes;
