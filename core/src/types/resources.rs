//! Resources a node offers and a task asks for: CPU in MHz, memory and disk in MB.

use serde::{Deserialize, Serialize};
use std::ops::{Add, AddAssign, Sub};

/// A resource vector. Arithmetic saturates: a node never shows negative free capacity.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug, Serialize, Deserialize)]
pub struct Resources {
    pub cpu_mhz: u64,
    pub memory_mb: u64,
    pub disk_mb: u64,
}

/// The dimension that ran out when a placement did not fit; recorded in placement metrics.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub enum Dimension {
    Cpu,
    Memory,
    Disk,
}

impl Dimension {
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::Cpu => "cpu",
            Dimension::Memory => "memory",
            Dimension::Disk => "disk",
        }
    }
}

impl std::fmt::Display for Dimension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Resources {
    pub const ZERO: Self = Self {
        cpu_mhz: 0,
        memory_mb: 0,
        disk_mb: 0,
    };

    pub fn new(cpu_mhz: u64, memory_mb: u64, disk_mb: u64) -> Self {
        Self {
            cpu_mhz,
            memory_mb,
            disk_mb,
        }
    }

    /// The first dimension in which `self` does not cover `need`, if any.
    pub fn exhausted_by(&self, need: &Resources) -> Option<Dimension> {
        if need.cpu_mhz > self.cpu_mhz {
            Some(Dimension::Cpu)
        } else if need.memory_mb > self.memory_mb {
            Some(Dimension::Memory)
        } else if need.disk_mb > self.disk_mb {
            Some(Dimension::Disk)
        } else {
            None
        }
    }

    /// Whether `need` fits inside `self` in every dimension.
    pub fn covers(&self, need: &Resources) -> bool {
        self.exhausted_by(need).is_none()
    }

    pub fn saturating_sub(&self, other: &Resources) -> Resources {
        Resources {
            cpu_mhz: self.cpu_mhz.saturating_sub(other.cpu_mhz),
            memory_mb: self.memory_mb.saturating_sub(other.memory_mb),
            disk_mb: self.disk_mb.saturating_sub(other.disk_mb),
        }
    }

    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }
}

impl Add for Resources {
    type Output = Resources;
    fn add(self, o: Resources) -> Resources {
        Resources {
            cpu_mhz: self.cpu_mhz.saturating_add(o.cpu_mhz),
            memory_mb: self.memory_mb.saturating_add(o.memory_mb),
            disk_mb: self.disk_mb.saturating_add(o.disk_mb),
        }
    }
}

impl AddAssign for Resources {
    fn add_assign(&mut self, o: Resources) {
        *self = *self + o;
    }
}

impl Sub for Resources {
    type Output = Resources;
    fn sub(self, o: Resources) -> Resources {
        self.saturating_sub(&o)
    }
}

impl std::iter::Sum for Resources {
    fn sum<I: Iterator<Item = Resources>>(iter: I) -> Resources {
        iter.fold(Resources::ZERO, |a, b| a + b)
    }
}
