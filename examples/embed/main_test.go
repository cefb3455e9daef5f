package main

// The README's program, run: its output is the README's too.
func Example() {
	main()
	// Output:
	// [resnet] on 4 v100 GPUs of v100-0
	// [bert] on 2 v100 GPUs of v100-1
	// [bert] kept its GPUs: true
	// [resnet] kept its GPUs: true
	// stop: [] waiting: 0
}
