//! What KVM holds of a VM and its vCPUs, as a snapshot keeps it. KVM's
//! structures (registers, interrupt controllers, …) are kept as hex of
//! their bytes: their layout is the kernel ABI, and a size that does not
//! match refuses the file.

use serde::{Deserialize, Serialize};

/// The in-kernel devices of the VM.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct VmState {
    pub pic_master: Pod,
    pub pic_slave: Pod,
    pub ioapic: Pod,
    pub pit: Pod,
    pub clock: Pod,
}

/// One vCPU, in the order it is restored.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct VcpuState {
    pub id: u8,
    pub mp_state: Pod,
    pub regs: Pod,
    pub sregs: Pod,
    pub xsave: Pod,
    pub xcrs: Pod,
    pub debugregs: Pod,
    pub lapic: Pod,
    /// (index, value) of every MSR KVM would give.
    pub msrs: Vec<(u32, u64)>,
    pub vcpu_events: Pod,
}

/// A KVM structure as the hex of its bytes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Pod(String);

/// Plain-old-data KVM structures: C structs of integers and arrays of
/// them, for which every byte pattern is a valid value.
///
/// # Safety
/// Only for such types.
pub unsafe trait PlainData: Default {}

macro_rules! plain_data {
    ($($t:ty),*) => { $(
        // SAFETY: a kvm-bindings C struct of integers (and unions and
        // arrays of them).
        unsafe impl PlainData for $t {}
    )* };
}
plain_data!(
    kvm_bindings::kvm_regs,
    kvm_bindings::kvm_sregs,
    kvm_bindings::kvm_xsave,
    kvm_bindings::kvm_xcrs,
    kvm_bindings::kvm_debugregs,
    kvm_bindings::kvm_lapic_state,
    kvm_bindings::kvm_mp_state,
    kvm_bindings::kvm_vcpu_events,
    kvm_bindings::kvm_irqchip,
    kvm_bindings::kvm_pit_state2,
    kvm_bindings::kvm_clock_data
);

impl Pod {
    pub fn of<T: PlainData>(v: &T) -> Pod {
        // SAFETY: T is plain data: its bytes are all initialised
        // integers, read for exactly its size.
        let bytes = unsafe {
            std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>())
        };
        Pod(hex(bytes))
    }

    /// The value back, if the stored size is `T`'s.
    pub fn get<T: PlainData>(&self, what: &str) -> Result<T, String> {
        let bytes = unhex(&self.0).ok_or_else(|| format!("{what} is not hex"))?;
        if bytes.len() != std::mem::size_of::<T>() {
            return Err(format!(
                "{what} is {} bytes, this KVM's is {}",
                bytes.len(),
                std::mem::size_of::<T>()
            ));
        }
        let mut v = T::default();
        // SAFETY: T is plain data (any bytes are a valid T) and exactly
        // `bytes.len()` long.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                (&mut v as *mut T).cast::<u8>(),
                bytes.len(),
            )
        };
        Ok(v)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_structure_of_another_size_is_refused() {
        let pod = Pod::of(&kvm_bindings::kvm_regs::default());
        let e = pod.get::<kvm_bindings::kvm_sregs>("sregs").unwrap_err();
        assert!(e.contains("sregs is"), "{e}");
    }
}
