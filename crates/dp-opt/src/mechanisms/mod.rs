//! Mechanisms built on the optimizers beyond the matrix mechanism (which
//! is dp-core's): the generalized Gaussian and projection mechanisms.

pub mod projection;
