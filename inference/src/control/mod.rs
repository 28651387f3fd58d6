//! ControlNet inputs: the preprocessors that turn an image into a control map.

pub mod canny;
