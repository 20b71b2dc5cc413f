//! PrioritySort: higher `spec.priority` first, then the pod that entered the queue first.

use std::sync::Arc;

use crate::framework::{Plugin, PluginPoints, QueueSortPlugin, QueuedPodInfo};
use crate::plugin_points;

use super::names::PRIORITY_SORT;

pub struct PrioritySort;

impl Plugin for PrioritySort {
    fn name(&self) -> &'static str {
        PRIORITY_SORT
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => queue_sort)
    }
}

impl QueueSortPlugin for PrioritySort {
    fn less(&self, a: &QueuedPodInfo, b: &QueuedPodInfo) -> bool {
        let (pa, pb) = (a.pod.priority, b.pod.priority);
        pa > pb || (pa == pb && a.timestamp < b.timestamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PodInfo;

    fn queued(priority: i32, timestamp: u64) -> QueuedPodInfo {
        let pod = PodInfo {
            priority,
            ..PodInfo::default()
        };
        QueuedPodInfo::new(Arc::new(pod), timestamp)
    }

    #[test]
    fn higher_priority_first_then_older() {
        let s = PrioritySort;
        assert!(s.less(&queued(10, 5), &queued(1, 1)));
        assert!(!s.less(&queued(1, 1), &queued(10, 5)));
        assert!(s.less(&queued(1, 1), &queued(1, 2)));
        assert!(!s.less(&queued(1, 2), &queued(1, 1)));
        assert!(!s.less(&queued(1, 2), &queued(1, 2)));
    }
}
