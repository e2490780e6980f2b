// placeholder replaced by the device header helper
