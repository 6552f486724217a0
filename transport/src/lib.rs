pub fn _p() {}
