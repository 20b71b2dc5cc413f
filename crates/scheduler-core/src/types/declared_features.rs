//! Node features a pod needs (upstream `k8s.io/component-helpers/nodedeclaredfeatures`,
//! KEP-5328): which features of the registry a pod's spec requires at scheduling time, for
//! the NodeDeclaredFeatures plugin to match against `node.status.declaredFeatures`.
//!
//! Only the registry's features that infer a requirement from fields the 1.37 API carries
//! are listed; the others infer nothing at scheduling time (resize features only on
//! updates). No feature has a maximum version yet, so the scheduler's version drops none.

use k8s_openapi::api::core::v1 as k8s;

pub const RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS: &str = "RestartAllContainersOnContainerExits";
pub const USER_NAMESPACES_HOST_NETWORK_SUPPORT: &str = "UserNamespacesHostNetworkSupport";
pub const VOLUME_BIND_MOUNT_OPTIONS: &str = "VolumeBindMountOptions";

/// The restart-rule action that needs RestartAllContainersOnContainerExits.
const RESTART_ALL_CONTAINERS: &str = "RestartAllContainers";

type Infer = fn(&k8s::PodSpec) -> bool;

/// The registry, sorted by name as upstream's framework sorts it: requirements (and the
/// unsatisfied ones a Filter reports) come out in this order.
const REGISTRY: &[(&str, Infer)] = &[
    (
        RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS,
        restarts_all_containers,
    ),
    (
        USER_NAMESPACES_HOST_NETWORK_SUPPORT,
        host_network_in_user_namespace,
    ),
    (VOLUME_BIND_MOUNT_OPTIONS, uses_bind_mount_options),
];

/// The features `spec` requires of its node, in registry order.
pub fn required_features(spec: &k8s::PodSpec) -> Vec<&'static str> {
    REGISTRY
        .iter()
        .filter(|(_, infer)| infer(spec))
        .map(|(name, _)| *name)
        .collect()
}

fn regular_and_init(spec: &k8s::PodSpec) -> impl Iterator<Item = &k8s::Container> {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
}

fn restarts_all_containers(spec: &k8s::PodSpec) -> bool {
    regular_and_init(spec).any(|c| {
        c.restart_policy_rules
            .iter()
            .flatten()
            .any(|r| r.action == RESTART_ALL_CONTAINERS)
    })
}

fn host_network_in_user_namespace(spec: &k8s::PodSpec) -> bool {
    spec.host_network == Some(true) && spec.host_users == Some(false)
}

fn uses_bind_mount_options(spec: &k8s::PodSpec) -> bool {
    let ephemeral = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .flat_map(|c| c.volume_mounts.iter().flatten());
    regular_and_init(spec)
        .flat_map(|c| c.volume_mounts.iter().flatten())
        .chain(ephemeral)
        .any(|m| m.bind_mount_options.as_ref().is_some_and(|o| !o.is_empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(edit: impl FnOnce(&mut k8s::Container)) -> k8s::Container {
        let mut c = k8s::Container {
            name: "c".into(),
            ..Default::default()
        };
        edit(&mut c);
        c
    }

    fn rule(action: &str) -> k8s::ContainerRestartRule {
        k8s::ContainerRestartRule {
            action: action.into(),
            ..Default::default()
        }
    }

    /// Upstream's inference cases, one per feature, plus the near misses.
    #[test]
    fn inference_per_feature() {
        let plain = k8s::PodSpec {
            containers: vec![container(|_| {})],
            ..Default::default()
        };
        assert!(required_features(&plain).is_empty());

        let restart_rule = |action: &str, init: bool| {
            let c = container(|c| c.restart_policy_rules = Some(vec![rule(action)]));
            let mut spec = plain.clone();
            if init {
                spec.init_containers = Some(vec![c]);
            } else {
                spec.containers = vec![c];
            }
            required_features(&spec)
        };
        assert_eq!(
            restart_rule("RestartAllContainers", false),
            [RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS]
        );
        assert_eq!(
            restart_rule("RestartAllContainers", true),
            [RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS]
        );
        assert!(restart_rule("Restart", false).is_empty());

        let userns = |host_network: Option<bool>, host_users: Option<bool>| {
            let spec = k8s::PodSpec {
                host_network,
                host_users,
                ..plain.clone()
            };
            required_features(&spec)
        };
        assert_eq!(
            userns(Some(true), Some(false)),
            [USER_NAMESPACES_HOST_NETWORK_SUPPORT]
        );
        assert!(userns(Some(true), None).is_empty());
        assert!(userns(Some(true), Some(true)).is_empty());
        assert!(userns(None, Some(false)).is_empty());

        let mount = |options: Option<Vec<String>>| k8s::VolumeMount {
            name: "v".into(),
            mount_path: "/v".into(),
            bind_mount_options: options,
            ..Default::default()
        };
        let mut with_mount = plain.clone();
        with_mount.containers[0].volume_mounts = Some(vec![mount(Some(vec!["noexec".into()]))]);
        assert_eq!(required_features(&with_mount), [VOLUME_BIND_MOUNT_OPTIONS]);
        with_mount.containers[0].volume_mounts = Some(vec![mount(Some(vec![]))]);
        assert!(required_features(&with_mount).is_empty());
        let mut ephemeral = plain.clone();
        ephemeral.ephemeral_containers = Some(vec![k8s::EphemeralContainer {
            name: "debug".into(),
            volume_mounts: Some(vec![mount(Some(vec!["nosuid".into()]))]),
            ..Default::default()
        }]);
        assert_eq!(required_features(&ephemeral), [VOLUME_BIND_MOUNT_OPTIONS]);
    }

    #[test]
    fn several_features_come_out_sorted() {
        let spec = k8s::PodSpec {
            host_network: Some(true),
            host_users: Some(false),
            containers: vec![container(|c| {
                c.restart_policy_rules = Some(vec![rule("RestartAllContainers")]);
            })],
            ..Default::default()
        };
        assert_eq!(
            required_features(&spec),
            [
                RESTART_ALL_CONTAINERS_ON_CONTAINER_EXITS,
                USER_NAMESPACES_HOST_NETWORK_SUPPORT
            ]
        );
    }
}
