//! DefaultBinder: binds with a `Binding` object, which the controller POSTs.

use std::sync::Arc;

use crate::framework::{BindAction, BindPlugin, CycleState, Plugin, PluginPoints, Status};
use crate::plugin_points;
use crate::types::PodInfo;

use super::names::DEFAULT_BINDER;

pub struct DefaultBinder;

impl Plugin for DefaultBinder {
    fn name(&self) -> &'static str {
        DEFAULT_BINDER
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => bind)
    }
}

impl BindPlugin for DefaultBinder {
    fn bind(&self, _state: &CycleState, pod: &PodInfo, node: &str) -> Result<BindAction, Status> {
        Ok(BindAction::Binding {
            pod: pod.key().clone(),
            uid: pod.uid.clone(),
            node: node.to_string(),
        })
    }
}
