package main

func init() {
	extraCommands = append(extraCommands, newResourceCmd)
}
