//! Numeric functions beyond arithmetic: `log(number, base)`, `pow(base, exponent)` and
//! `signum(number)`, as Terraform defines them.

use super::{Result, num, whole};
use hcl::eval::FuncArgs;

pub(super) fn log(a: FuncArgs) -> Result {
    let (x, base) = (num(&a[0]), num(&a[1]));
    if x <= 0.0 {
        return Err(format!("log: {x} is not above zero"));
    }
    if base <= 0.0 || base == 1.0 {
        return Err(format!(
            "log: a base of {base} is not above zero and other than 1"
        ));
    }
    Ok(whole(x.ln() / base.ln()))
}

pub(super) fn pow(a: FuncArgs) -> Result {
    let value = num(&a[0]).powf(num(&a[1]));
    if !value.is_finite() {
        return Err(format!(
            "pow: {}^{} is not a finite number",
            num(&a[0]),
            num(&a[1])
        ));
    }
    Ok(whole(value))
}

pub(super) fn signum(a: FuncArgs) -> Result {
    let x = num(&a[0]);
    Ok(whole(if x > 0.0 {
        1.0
    } else if x < 0.0 {
        -1.0
    } else {
        0.0
    }))
}
