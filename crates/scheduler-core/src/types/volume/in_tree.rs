//! In-tree volume plugins as their CSI drivers see them once migrated (upstream
//! csi-translation-lib: driver name and volume handle), and the in-tree disks
//! VolumeRestrictions checks for conflicts.

use k8s_openapi::api::core::v1 as k8s;

pub const AWS_EBS_PLUGIN: &str = "kubernetes.io/aws-ebs";
pub const GCE_PD_PLUGIN: &str = "kubernetes.io/gce-pd";
pub const AZURE_DISK_PLUGIN: &str = "kubernetes.io/azure-disk";
pub const CINDER_PLUGIN: &str = "kubernetes.io/cinder";
pub const PORTWORX_PLUGIN: &str = "kubernetes.io/portworx-volume";

/// The CSI driver an in-tree plugin migrates to, for the plugins whose migration upstream's
/// scheduler honours (1.33: AWS EBS, GCE PD, Azure Disk, Cinder, Portworx; Azure File and
/// vSphere are translatable but never counted as migrated).
pub fn migrated_csi_driver(plugin: &str) -> Option<&'static str> {
    Some(match plugin {
        AWS_EBS_PLUGIN => "ebs.csi.aws.com",
        GCE_PD_PLUGIN => "pd.csi.storage.gke.io",
        AZURE_DISK_PLUGIN => "disk.csi.azure.com",
        CINDER_PLUGIN => "cinder.csi.openstack.org",
        PORTWORX_PLUGIN => "pxd.portworx.com",
        _ => return None,
    })
}

/// An in-tree volume (inline in a pod or a PersistentVolume's source) as its CSI driver sees
/// it once migrated: upstream csi-translation-lib's driver name and volume handle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InTreeVolume {
    pub plugin: &'static str,
    pub driver: &'static str,
    pub handle: String,
}

impl InTreeVolume {
    fn new(plugin: &'static str, handle: String) -> Option<Self> {
        Some(InTreeVolume {
            plugin,
            driver: migrated_csi_driver(plugin)?,
            handle,
        })
    }

    /// `driver/handle`, the key attach limits count unique volumes by.
    pub fn unique_name(&self) -> String {
        format!("{}/{}", self.driver, self.handle)
    }
}

/// An EBS volume ID as the CSI driver names it: `aws://<zone>/<id>` becomes `<id>`.
fn ebs_volume_handle(id: &str) -> String {
    match id.strip_prefix("aws://") {
        Some(rest) => rest
            .split_once('/')
            .map_or(rest, |(_, path)| path)
            .trim_matches('/')
            .to_string(),
        None => id.to_string(),
    }
}

const GCE_UNSPECIFIED: &str = "UNSPECIFIED";

/// A PD's CSI handle: zonal `projects/UNSPECIFIED/zones/<zone>/disks/<pd>`, or regional
/// (`a__b` multi-zone label) `projects/UNSPECIFIED/regions/<region>/disks/<pd>`.
fn gce_pd_handle(pd: &str, zone_label: Option<&str>) -> String {
    let zone = zone_label.unwrap_or(GCE_UNSPECIFIED);
    let zones: Vec<&str> = zone.split("__").collect();
    if zones.len() > 1 {
        let regions: Vec<&str> = zones
            .iter()
            .map(|z| z.rsplit_once('-').map_or(*z, |(r, _)| r))
            .collect();
        if regions.iter().all(|r| *r == regions[0]) {
            return format!(
                "projects/{GCE_UNSPECIFIED}/regions/{}/disks/{pd}",
                regions[0]
            );
        }
    }
    format!("projects/{GCE_UNSPECIFIED}/zones/{zone}/disks/{pd}")
}

/// The migratable in-tree source of a PersistentVolume (translation of a PV source).
pub(super) fn pv_in_tree_source(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    spec: &k8s::PersistentVolumeSpec,
) -> Option<InTreeVolume> {
    if let Some(s) = &spec.aws_elastic_block_store {
        return InTreeVolume::new(AWS_EBS_PLUGIN, ebs_volume_handle(&s.volume_id));
    }
    if let Some(s) = &spec.gce_persistent_disk {
        let labels = meta.labels.as_ref();
        let zone = labels
            .and_then(|l| l.get("topology.kubernetes.io/zone"))
            .or_else(|| labels.and_then(|l| l.get("failure-domain.beta.kubernetes.io/zone")));
        return InTreeVolume::new(
            GCE_PD_PLUGIN,
            gce_pd_handle(&s.pd_name, zone.map(String::as_str)),
        );
    }
    if let Some(s) = &spec.azure_disk {
        return InTreeVolume::new(AZURE_DISK_PLUGIN, s.disk_uri.clone());
    }
    if let Some(s) = &spec.cinder {
        return InTreeVolume::new(CINDER_PLUGIN, s.volume_id.clone());
    }
    if let Some(s) = &spec.portworx_volume {
        return InTreeVolume::new(PORTWORX_PLUGIN, s.volume_id.clone());
    }
    None
}

/// The migratable in-tree source of a pod's inline volume (a zone is not known inline).
pub(super) fn inline_in_tree_source(v: &k8s::Volume) -> Option<InTreeVolume> {
    if let Some(s) = &v.aws_elastic_block_store {
        return InTreeVolume::new(AWS_EBS_PLUGIN, ebs_volume_handle(&s.volume_id));
    }
    if let Some(s) = &v.gce_persistent_disk {
        return InTreeVolume::new(GCE_PD_PLUGIN, gce_pd_handle(&s.pd_name, None));
    }
    if let Some(s) = &v.azure_disk {
        return InTreeVolume::new(AZURE_DISK_PLUGIN, s.disk_uri.clone());
    }
    if let Some(s) = &v.cinder {
        return InTreeVolume::new(CINDER_PLUGIN, s.volume_id.clone());
    }
    if let Some(s) = &v.portworx_volume {
        return InTreeVolume::new(PORTWORX_PLUGIN, s.volume_id.clone());
    }
    None
}

/// An in-tree volume that VolumeRestrictions checks for disk conflicts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiskVolume {
    GcePd {
        name: String,
        read_only: bool,
    },
    AwsEbs {
        volume_id: String,
    },
    Iscsi {
        iqn: String,
        read_only: bool,
    },
    Rbd {
        monitors: Vec<String>,
        pool: String,
        image: String,
        read_only: bool,
    },
}

impl DiskVolume {
    /// Upstream `isVolumeConflict` for one pair of volumes.
    pub fn conflicts_with(&self, other: &DiskVolume) -> bool {
        use DiskVolume::*;
        match (self, other) {
            (
                GcePd { name, read_only },
                GcePd {
                    name: n2,
                    read_only: r2,
                },
            ) => name == n2 && !(*read_only && *r2),
            (AwsEbs { volume_id }, AwsEbs { volume_id: v2 }) => volume_id == v2,
            (
                Iscsi { iqn, read_only },
                Iscsi {
                    iqn: i2,
                    read_only: r2,
                },
            ) => iqn == i2 && !(*read_only && *r2),
            (
                Rbd {
                    monitors,
                    pool,
                    image,
                    read_only,
                },
                Rbd {
                    monitors: m2,
                    pool: p2,
                    image: i2,
                    read_only: r2,
                },
            ) => {
                monitors.iter().any(|m| m2.contains(m))
                    && pool == p2
                    && image == i2
                    && !(*read_only && *r2)
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_conflicts_need_a_writer() {
        let ro = DiskVolume::GcePd {
            name: "d".into(),
            read_only: true,
        };
        let rw = DiskVolume::GcePd {
            name: "d".into(),
            read_only: false,
        };
        assert!(!ro.conflicts_with(&ro));
        assert!(rw.conflicts_with(&ro));
        let ebs = DiskVolume::AwsEbs {
            volume_id: "v".into(),
        };
        assert!(ebs.conflicts_with(&ebs));
        assert!(!ebs.conflicts_with(&rw));
    }

    #[test]
    fn in_tree_sources_translate_to_csi_handles() {
        assert_eq!(ebs_volume_handle("aws://us-east-1a/vol-1"), "vol-1");
        assert_eq!(ebs_volume_handle("aws:///vol-2"), "vol-2");
        assert_eq!(ebs_volume_handle("vol-3"), "vol-3");
        assert_eq!(
            gce_pd_handle("d", Some("us-central1-a")),
            "projects/UNSPECIFIED/zones/us-central1-a/disks/d"
        );
        assert_eq!(
            gce_pd_handle("d", Some("us-central1-a__us-central1-b")),
            "projects/UNSPECIFIED/regions/us-central1/disks/d"
        );
        assert_eq!(
            gce_pd_handle("d", None),
            "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/d"
        );
        // vSphere can be translated upstream, but the scheduler never counts it as migrated.
        assert_eq!(migrated_csi_driver("kubernetes.io/vsphere-volume"), None);
    }
}
