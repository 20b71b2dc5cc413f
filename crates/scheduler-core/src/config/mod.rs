//! Component config: `kubescheduler.config.k8s.io/v1` KubeSchedulerConfiguration.
