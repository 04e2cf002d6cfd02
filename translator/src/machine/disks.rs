//! A machine's data disks, storage types and caching, checked as CAPZ's webhooks check them.

use strata_crds::azure::*;

use super::Input;
use crate::InputError;

/// The data disks, with CAPZ's checks (names and LUNs unique, a free LUN when none is given)
/// and defaults (Ultra disks do not cache, others cache ReadWrite).
pub(super) fn data_disks(
    i: &Input,
    note: &mut impl FnMut(&str, &str),
) -> Result<Vec<DataDisk>, InputError> {
    let spec = i.spec;
    let err = |field: &str, message: String| i.err(field, message);
    let mut data_disks = Vec::new();
    let mut used_luns: Vec<i32> = spec.data_disks.iter().filter_map(|d| d.lun).collect();
    for (i, d) in spec.data_disks.iter().enumerate() {
        let field = format!("spec.dataDisks[{i}]");
        if d.name_suffix.is_empty()
            || !d
                .name_suffix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(err(
                &format!("{field}.nameSuffix"),
                "letters, digits, '_' and '-' only".into(),
            ));
        }
        if spec.data_disks[..i]
            .iter()
            .any(|o| o.name_suffix == d.name_suffix)
        {
            return Err(err(
                &format!("{field}.nameSuffix"),
                format!("{:?} is used twice", d.name_suffix),
            ));
        }
        let lun = match d.lun {
            Some(l) => {
                if spec.data_disks[..i].iter().any(|o| o.lun == Some(l)) {
                    return Err(err(
                        &format!("{field}.lun"),
                        format!("lun {l} is used twice"),
                    ));
                }
                l
            }
            None => {
                let l = (0..64)
                    .find(|l| !used_luns.contains(l))
                    .ok_or_else(|| err(&format!("{field}.lun"), "no free lun left".into()))?;
                used_luns.push(l);
                l
            }
        };
        if d.managed_disk
            .as_ref()
            .is_some_and(|m| m.disk_encryption_set.is_some())
        {
            note(
                &format!("{field}.managedDisk.diskEncryptionSet"),
                "not translated yet",
            );
        }
        if d.managed_disk
            .as_ref()
            .is_some_and(|m| m.security_profile.is_some())
        {
            note(
                &format!("{field}.managedDisk.securityProfile"),
                "not translated yet",
            );
        }
        let storage = storage_type(
            d.managed_disk
                .as_ref()
                .and_then(|m| m.storage_account_type.as_deref()),
            &format!("{field}.managedDisk.storageAccountType"),
            &err,
        )?;
        // CAPZ: Ultra disks cannot cache; other data disks default to ReadWrite.
        let default_caching = if storage == StorageAccountType::UltraSSD_LRS {
            CachingType::None
        } else {
            CachingType::ReadWrite
        };
        data_disks.push(DataDisk {
            name_suffix: d.name_suffix.clone(),
            disk_size_gb: d.disk_size_gb,
            lun,
            storage_account_type: storage,
            caching: caching(
                d.caching_type.as_deref(),
                default_caching,
                &format!("{field}.cachingType"),
                &err,
            )?,
        });
    }

    Ok(data_disks)
}

pub(super) fn storage_type(
    v: Option<&str>,
    field: &str,
    err: &impl Fn(&str, String) -> InputError,
) -> Result<StorageAccountType, InputError> {
    use StorageAccountType::*;
    Ok(match v {
        None => Premium_LRS,
        Some("Standard_LRS") => Standard_LRS,
        Some("Premium_LRS") => Premium_LRS,
        Some("StandardSSD_LRS") => StandardSSD_LRS,
        Some("UltraSSD_LRS") => UltraSSD_LRS,
        Some("Premium_ZRS") => Premium_ZRS,
        Some("StandardSSD_ZRS") => StandardSSD_ZRS,
        Some("PremiumV2_LRS") => PremiumV2_LRS,
        Some(other) => {
            return Err(err(
                field,
                format!("unknown storage account type {other:?}"),
            ));
        }
    })
}

pub(super) fn caching(
    v: Option<&str>,
    default: CachingType,
    field: &str,
    err: &impl Fn(&str, String) -> InputError,
) -> Result<CachingType, InputError> {
    Ok(match v {
        None | Some("") => default,
        Some("None") => CachingType::None,
        Some("ReadOnly") => CachingType::ReadOnly,
        Some("ReadWrite") => CachingType::ReadWrite,
        Some(other) => return Err(err(field, format!("unknown caching type {other:?}"))),
    })
}
